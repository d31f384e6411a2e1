// Connecting: the connect frame, credentials, refusals, and state events with NIM-5/RC-1 mapping.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RoomcastClient, RoomcastError, NimState } from '../roomcast.js';
import { connectedClient, makeSocketClass, fakeTimers, flush, CONNECTED } from './fakes.mjs';

function setup(options) {
  const WS = makeSocketClass();
  const timers = fakeTimers();
  const client = new RoomcastClient('ws://gateway.test/ws', {
    transport: 'websocket', WebSocket: WS, setTimeout: timers.setTimeout, clearTimeout: timers.clearTimeout, now: timers.now, random: () => 0, ...options,
  });
  const states = [];
  client.on('state', (s) => states.push(s));
  return { WS, timers, client, states };
}

test('the first message is connect with the token and device, exactly', async () => {
  const { WS, client } = setup({ token: 'jwt-1', device: 'web-1' });
  const p = client.connect();
  await flush();
  assert.equal(WS.instances.length, 1);
  assert.equal(WS.last.url, 'ws://gateway.test/ws');
  WS.last.open();
  assert.deepEqual(WS.last.sent, ['{"id":1,"op":"connect","args":{"token":"jwt-1","device":"web-1"}}']);
  WS.last.answerLast(CONNECTED);
  assert.deepEqual(await p, CONNECTED);
  assert.deepEqual(client.session, CONNECTED);
  assert.equal(client.state, 'connected');
});

test('anonymous connect sends appKey and the anonymous profile', async () => {
  const { WS, client } = setup({ anonymous: { appKey: 'key-1', nickname: 'Guest', avatar: 'a.png' }, device: 'd' });
  client.connect();
  await flush();
  WS.last.open();
  assert.deepEqual(WS.last.frames, [{ id: 1, op: 'connect', args: { appKey: 'key-1', anonymous: { nickname: 'Guest', avatar: 'a.png' }, device: 'd' } }]);
});

test('anonymous connect without a profile sends an empty anonymous object', async () => {
  const { WS, client } = setup({ anonymous: { appKey: 'key-1' } });
  client.connect();
  await flush();
  WS.last.open();
  assert.deepEqual(WS.last.frames[0].args, { appKey: 'key-1', anonymous: {} });
});

test('getToken supplies the first token when none is given; conversationCursor is sent', async () => {
  let calls = 0;
  const { WS, client } = setup({ getToken: async () => `minted-${++calls}`, conversationCursor: 17 });
  client.connect();
  await flush();
  assert.equal(calls, 1);
  WS.last.open();
  assert.deepEqual(WS.last.frames[0].args, { token: 'minted-1', conversationCursor: 17 });
});

test('a token given up front is used for the first connect without calling getToken', async () => {
  let calls = 0;
  const { WS, client } = setup({ token: 'given', getToken: async () => { calls++; return 'minted'; } });
  client.connect();
  await flush();
  WS.last.open();
  assert.equal(calls, 0);
  assert.equal(WS.last.frames[0].args.token, 'given');
});

test('options without credentials or WebSocket are refused by the constructor', () => {
  assert.throws(() => new RoomcastClient('ws://x', { WebSocket: makeSocketClass() }), TypeError);
  assert.throws(() => new RoomcastClient('ws://x', { token: 't', WebSocket: null, transport: 'websocket' }), TypeError);
});

test('state events: connecting (0, joining) then connected (1, joined)', async () => {
  const { states } = await connectedClient();
  assert.deepEqual(states, [
    { state: 'connecting', previous: 'disconnected', nimState: 0, rcStatus: 'joining', at: 1_000_000 },
    { state: 'connected', previous: 'connecting', nimState: 1, rcStatus: 'joined', at: 1_000_000 },
  ]);
});

test('a lost connection reports disconnected (3 connectionLost, quit) with the code and the backoff', async () => {
  const { ws, states } = await connectedClient();
  ws.serverClose(1001, 'server shutting down');
  assert.deepEqual(states.at(-1), {
    state: 'disconnected', previous: 'connected', nimState: NimState.connectionLost, rcStatus: 'quit', at: 1_000_000,
    code: 1001, reason: 'server shutting down', willReconnect: true, delayMs: 500,
  });
});

test('a refused connect (error answer, close 4004) rejects connect(), reports enterFailed (2) and does not reconnect', async () => {
  const { WS, timers, client, states } = setup({ token: 'bad', getToken: async () => 'also-bad' });
  const p = client.connect();
  await flush();
  WS.last.open();
  WS.last.receive({ id: 1, error: { code: 40105, message: 'the client token is invalid', field: 'token' } });
  WS.last.serverClose(4004, 'invalid token');
  await assert.rejects(p, (err) => err instanceof RoomcastError && err.code === 40105 && err.field === 'token' && err.closeCode === 4004);
  const last = states.at(-1);
  assert.equal(last.state, 'disconnected');
  assert.equal(last.nimState, NimState.enterFailed);
  assert.equal(last.rcStatus, 'quit');
  assert.equal(last.code, 4004);
  assert.equal(last.willReconnect, false);
  assert.equal(last.error.code, 40105);
  timers.advance(120_000);
  await flush();
  assert.equal(WS.instances.length, 1);
  assert.deepEqual(timers.pending(), []);
});

test('a connect error answer the server does not follow with a close: the client closes and gives up', async () => {
  const { WS, client, states } = setup({ token: 't' });
  const p = client.connect();
  await flush();
  WS.last.open();
  WS.last.receive({ id: 1, error: { code: 1002, message: 'conversationCursor must not be negative', field: 'args.conversationCursor' } });
  await assert.rejects(p, (err) => err.code === 1002);
  assert.deepEqual(WS.last.closeCalls, [{ code: 1000, reason: undefined }]);
  assert.equal(states.at(-1).nimState, NimState.enterFailed);
});

test('connect() while connected resolves with the session; connect() after close() starts afresh', async () => {
  const { client, WS } = await connectedClient();
  assert.deepEqual(await client.connect(), CONNECTED);
  assert.equal(WS.instances.length, 1);
  client.close();
  const again = client.connect();
  await flush();
  assert.equal(WS.instances.length, 2);
  WS.last.open();
  assert.equal(WS.last.frames[0].args.token, 'tok-1');
  WS.last.answerLast(CONNECTED);
  assert.deepEqual(await again, CONNECTED);
});

test('connect() keeps waiting through transient failures and resolves on the first success', async () => {
  const { WS, timers, client } = setup({ token: 't' });
  let result;
  client.connect().then((ok) => { result = ok; });
  await flush();
  WS.last.serverClose(1006); // the socket never opened
  timers.advance(500);
  await flush();
  assert.equal(WS.instances.length, 2);
  assert.equal(result, undefined);
  WS.last.open();
  WS.last.answerLast(CONNECTED);
  await flush();
  assert.deepEqual(result, CONNECTED);
});

test('a connect answer that does not come in time drops the socket and tries again', async () => {
  const { WS, timers, client, states } = setup({ token: 't', requestTimeoutMs: 3000 });
  client.connect();
  await flush();
  WS.last.open();
  timers.advance(3000);
  assert.deepEqual(WS.instances[0].closeCalls, [{ code: 1000, reason: undefined }]);
  assert.equal(states.at(-1).state, 'disconnected');
  assert.equal(states.at(-1).willReconnect, true);
  timers.advance(500);
  await flush();
  assert.equal(WS.instances.length, 2);
});

test('with autoReconnect false a lost connection is final and connect() rejects', async () => {
  const { WS, timers, client, states } = setup({ token: 't', autoReconnect: false });
  const p = client.connect();
  await flush();
  WS.last.serverClose(1006);
  await assert.rejects(p, (err) => err.code === 'disconnected' && err.closeCode === 1006);
  assert.equal(states.at(-1).nimState, NimState.connectionLost);
  assert.equal(states.at(-1).willReconnect, false);
  timers.advance(60_000);
  await flush();
  assert.equal(WS.instances.length, 1);
});

test('close() reports disconnected once, closes the socket with 1000 and rejects a waiting connect()', async () => {
  const { WS, client, states } = setup({ token: 't' });
  const p = client.connect();
  await flush();
  WS.last.open();
  client.close();
  await assert.rejects(p, (err) => err.code === 'closed');
  assert.deepEqual(WS.last.closeCalls, [{ code: 1000, reason: 'closed by client' }]);
  await flush();
  assert.deepEqual(states.map((s) => s.state), ['connecting', 'disconnected']);
  assert.equal(states[1].code, 1000);
  assert.equal(states[1].willReconnect, false);
  client.close();
  assert.equal(states.length, 2);
});
