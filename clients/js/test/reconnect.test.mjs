// Reconnecting: backoff with jitter and cap, which close codes are retried, tokens on reconnect.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backoffDelay, DEFAULT_BACKOFF, NimState } from '../roomcast.js';
import { connectedClient, flush, CONNECTED } from './fakes.mjs';

test('backoffDelay: min(maxMs, initialMs * factor^attempt), minus jitter * random of it', () => {
  assert.deepEqual(DEFAULT_BACKOFF, { initialMs: 500, maxMs: 30000, factor: 2, jitter: 0.5 });
  const none = () => 0;
  assert.deepEqual([0, 1, 2, 3, 4, 5, 6, 7, 20].map((a) => backoffDelay(a, DEFAULT_BACKOFF, none)),
    [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  const half = () => 0.5;
  assert.deepEqual([0, 1, 6].map((a) => backoffDelay(a, DEFAULT_BACKOFF, half)), [375, 750, 22500]);
  const almostOne = () => 0.999;
  assert.equal(backoffDelay(0, DEFAULT_BACKOFF, almostOne), 250);
  assert.equal(backoffDelay(2, { initialMs: 100, maxMs: 1000, factor: 3, jitter: 0 }, almostOne), 900);
  assert.equal(backoffDelay(3, { initialMs: 100, maxMs: 1000, factor: 3, jitter: 0 }, almostOne), 1000);
});

test('failed reconnects back off exponentially up to the cap, using the injected random', async () => {
  const randoms = [0.5, 0, 0.25, 0, 0, 0, 0, 0.5];
  let i = 0;
  const { WS, timers, ws, states } = await connectedClient({ random: () => randoms[i++], backoff: { initialMs: 1000, maxMs: 20000 } });
  ws.serverClose(1006);
  const delays = [];
  for (let n = 0; n < 8; n++) {
    delays.push(states.at(-1).delayMs);
    assert.deepEqual(timers.pending(), [states.at(-1).delayMs], 'one timer: the reconnect');
    timers.advance(states.at(-1).delayMs);
    await flush();
    WS.last.serverClose(1006); // this attempt fails before it opens
  }
  assert.deepEqual(delays, [750, 2000, 3500, 8000, 16000, 20000, 20000, 15000]);
  assert.equal(WS.instances.length, 9);
});

test('the attempt count resets after a successful connect', async () => {
  const { WS, timers, ws, states } = await connectedClient();
  ws.serverClose(1006);
  assert.equal(states.at(-1).delayMs, 500);
  timers.advance(500);
  await flush();
  WS.last.serverClose(1006);
  assert.equal(states.at(-1).delayMs, 1000);
  timers.advance(1000);
  await flush();
  WS.last.open();
  WS.last.answerLast(CONNECTED);
  WS.last.serverClose(1001);
  assert.equal(states.at(-1).delayMs, 500);
});

for (const code of [4004, 4003, 4000, 4010, 1002, 1003, 1007, 1009]) {
  test(`close code ${code}: no reconnect, enterFailed`, async () => {
    const { WS, timers, ws, states } = await connectedClient();
    ws.serverClose(code, 'refused');
    const last = states.at(-1);
    assert.equal(last.state, 'disconnected');
    assert.equal(last.code, code);
    assert.equal(last.willReconnect, false);
    assert.equal(last.nimState, NimState.enterFailed);
    assert.equal(last.error.closeCode, code);
    timers.advance(10 * 60_000);
    await flush();
    assert.equal(WS.instances.length, 1);
  });
}

for (const code of [1001, 4008, 4011, 4029, 1006, 1013, 4001, 4002, 1011]) {
  test(`close code ${code}: reconnect after the backoff`, async () => {
    const { WS, timers, ws, states } = await connectedClient();
    ws.serverClose(code);
    assert.equal(states.at(-1).willReconnect, true);
    assert.equal(states.at(-1).nimState, NimState.connectionLost);
    timers.advance(499);
    await flush();
    assert.equal(WS.instances.length, 1);
    timers.advance(1);
    await flush();
    assert.equal(WS.instances.length, 2);
    assert.equal(states.at(-1).state, 'connecting');
    WS.last.open();
    assert.equal(WS.last.frames[0].op, 'connect');
    WS.last.answerLast(CONNECTED);
    assert.equal(states.at(-1).state, 'connected');
    assert.deepEqual(states.map((s) => s.state), ['connecting', 'connected', 'disconnected', 'connecting', 'connected']);
  });
}

test('a 1000 the client did not start (e.g. from a proxy) is retried', async () => {
  const { WS, timers, ws, states } = await connectedClient();
  ws.serverClose(1000);
  assert.equal(states.at(-1).willReconnect, true);
  timers.advance(500);
  await flush();
  assert.equal(WS.instances.length, 2);
});

test('getToken is called before every reconnect, including after 4002', async () => {
  const tokens = ['t-2', 't-3'];
  let calls = 0;
  const { WS, timers, ws } = await connectedClient({ getToken: async () => { calls++; return tokens.shift(); } });
  assert.equal(calls, 0); // the first connect used options.token
  ws.serverClose(4002, 'token expired');
  timers.advance(500);
  await flush();
  assert.equal(calls, 1);
  WS.last.open();
  assert.equal(WS.last.frames[0].args.token, 't-2');
  WS.last.answerLast(CONNECTED);
  WS.last.serverClose(1001);
  timers.advance(500);
  await flush();
  WS.last.open();
  assert.equal(calls, 2);
  assert.equal(WS.last.frames[0].args.token, 't-3');
});

test('without getToken a reconnect uses the last token (as refreshed)', async () => {
  const { WS, timers, ws, client } = await connectedClient();
  const p = client.refreshToken('tok-2');
  ws.answerLast({});
  await p;
  ws.serverClose(1001);
  timers.advance(500);
  await flush();
  WS.last.open();
  assert.deepEqual(WS.last.frames[0], { id: 3, op: 'connect', args: { token: 'tok-2' } });
});

test('a connect refused with 40106 (token expired) is retried when getToken can give a new token', async () => {
  let calls = 0;
  const { WS, timers, ws, states } = await connectedClient({ getToken: async () => `fresh-${++calls}` });
  ws.serverClose(1001);
  timers.advance(500);
  await flush();
  WS.last.open();
  WS.last.receive({ id: WS.last.lastFrame.id, error: { code: 40106, message: 'the token has expired', field: 'token' } });
  WS.last.serverClose(4002);
  assert.equal(states.at(-1).willReconnect, true);
  assert.equal(states.at(-1).nimState, NimState.connectionLost);
  timers.advance(1000);
  await flush();
  WS.last.open();
  assert.equal(WS.last.frames[0].args.token, 'fresh-2');
});

test('a failing getToken counts as a failed attempt: error event, then backoff', async () => {
  let fail = true;
  const { WS, timers, ws, errors, states } = await connectedClient({ getToken: async () => { if (fail) throw new Error('auth server down'); return 'ok'; } });
  ws.serverClose(1006);
  timers.advance(500);
  await flush();
  assert.equal(WS.instances.length, 1);
  assert.equal(errors.length, 1);
  assert.equal(errors[0].type, 'token');
  assert.equal(states.at(-1).state, 'disconnected');
  assert.equal(states.at(-1).delayMs, 1000);
  fail = false;
  timers.advance(1000);
  await flush();
  assert.equal(WS.instances.length, 2);
});

test('close() while waiting to reconnect cancels the reconnect', async () => {
  const { WS, timers, ws, client, states } = await connectedClient();
  ws.serverClose(1006);
  assert.equal(timers.pending().length, 1);
  client.close();
  assert.deepEqual(timers.pending(), []);
  assert.equal(states.at(-1).willReconnect, false);
  timers.advance(60_000);
  await flush();
  assert.equal(WS.instances.length, 1);
});

test('close() while connected: socket closed with 1000, no reconnect afterwards', async () => {
  const { WS, timers, ws, client, states } = await connectedClient();
  client.close();
  assert.deepEqual(ws.closeCalls, [{ code: 1000, reason: 'closed by client' }]);
  await flush(); // the socket's close event comes now; it must change nothing
  timers.advance(60_000);
  await flush();
  assert.equal(WS.instances.length, 1);
  assert.deepEqual(states.map((s) => s.state), ['connecting', 'connected', 'disconnected']);
  assert.equal(client.state, 'disconnected');
});

test('close() while getToken is pending: no socket is made afterwards', async () => {
  let release;
  const { WS, timers, ws, client } = await connectedClient({ getToken: () => new Promise((r) => { release = r; }) });
  ws.serverClose(1006);
  timers.advance(500);
  await flush();
  client.close();
  release('late');
  await flush();
  assert.equal(WS.instances.length, 1);
});

test('a connect refused with a try-again code (50301) is retried with backoff', async () => {
  const { WS, timers, ws, states } = await connectedClient();
  ws.serverClose(1013);
  timers.advance(500);
  await flush();
  WS.last.open();
  WS.last.receive({ id: WS.last.lastFrame.id, error: { code: 50301, message: 'the store could not be read or written; try again' } });
  await flush(); // the client closes the socket itself; its close event follows
  assert.deepEqual(WS.last.closeCalls, [{ code: 1000, reason: undefined }]);
  assert.equal(states.at(-1).willReconnect, true);
  assert.equal(states.at(-1).nimState, NimState.connectionLost);
  assert.equal(states.at(-1).error.code, 50301);
  timers.advance(1000);
  await flush();
  assert.equal(WS.instances.length, 3);
});

test('connect() while connecting or waiting to reconnect opens no second socket, and resolves with the reconnect', async () => {
  const { WS, timers, ws, client } = await connectedClient();
  ws.serverClose(1006);
  const waiting = client.connect();
  await flush();
  assert.equal(WS.instances.length, 1);
  timers.advance(500);
  await flush();
  assert.equal(WS.instances.length, 2);
  const again = client.connect();
  await flush();
  assert.equal(WS.instances.length, 2);
  WS.last.open();
  WS.last.answerLast(CONNECTED);
  assert.deepEqual(await waiting, CONNECTED);
  assert.deepEqual(await again, CONNECTED);
  assert.deepEqual(WS.last.frames.map((f) => f.op), ['connect']);
});
