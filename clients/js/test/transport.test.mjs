// TR-3: the client falls back WebSocket → SSE → long-poll and back, resuming every room from the
// last position it delivered: no event lost, none delivered twice. The tests play the server
// with a fake WebSocket class and a fake fetch (fakes.mjs).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RoomcastClient, DEFAULT_FALLBACK, TRANSPORTS, httpBaseOf } from '../roomcast.js';
import { makeSocketClass, makeFetch, fakeTimers, settle, sse, joinReply, streamEvent, CONNECTED } from './fakes.mjs';

const EPOCH = 'e1';

/** The promise's rejection as its value (handled at once: no unhandled rejection). */
const caught = (promise) => promise.then(() => assert.fail('expected a rejection'), (err) => err);

function setup(options = {}) {
  const WS = makeSocketClass();
  const fetch = makeFetch();
  const timers = fakeTimers();
  const client = new RoomcastClient('ws://gateway.test/ws', {
    token: 'tok-1', WebSocket: WS, fetch, encoding: 'json',
    setTimeout: timers.setTimeout, clearTimeout: timers.clearTimeout, now: timers.now, random: () => 0,
    ...options,
  });
  const states = [];
  const transports = [];
  const messages = [];
  const errors = [];
  client.on('state', (s) => states.push(s));
  client.on('transport', (t) => transports.push(t.transport));
  client.on('room.message', (f) => messages.push(f.offset));
  client.on('error', (e) => errors.push(e));
  return { WS, fetch, timers, client, states, transports, messages, errors };
}

/** Answers the latest unanswered /client/ops post with `ok` (or `{error}` when `error` is given). */
async function answerOp(fetch, ok, error) {
  await settle();
  const post = fetch.to('/client/ops').filter((c) => !c.answered).at(0);
  assert.ok(post, 'a command was posted');
  post.json(200, error ? { id: post.body.id, error } : { id: post.body.id, ok });
  await settle();
  return post;
}

/** Makes the WebSocket fail before it opens, then answers GET /sse with a stream and a hello. */
async function onSse(t, hello = CONNECTED, streamId = 'sse-1') {
  const connecting = t.client.connect();
  await settle();
  t.WS.last.serverClose(1006); // the upgrade was refused
  assert.equal(t.states.at(-1).delayMs, 0, 'the next transport is tried at once');
  t.timers.advance(0);
  await settle();
  const get = t.fetch.lastTo('/sse');
  assert.ok(get, 'GET /sse');
  const stream = get.stream();
  stream.push(sse('hello', { stream: streamId, ok: hello }));
  await settle();
  assert.deepEqual(await connecting, hello);
  return { get, stream };
}

test('TR-3: transport option, defaults and the HTTP base', () => {
  assert.deepEqual(TRANSPORTS, ['websocket', 'sse', 'poll']);
  assert.equal(DEFAULT_FALLBACK.failuresBeforeFallback, 2);
  assert.equal(httpBaseOf('wss://chat.example.com/ws'), 'https://chat.example.com');
  assert.equal(httpBaseOf('ws://127.0.0.1:8080/ws'), 'http://127.0.0.1:8080');
  assert.equal(httpBaseOf('ws://h/base/ws?x=1'), 'http://h/base');
  assert.throws(() => new RoomcastClient('ws://x/ws', { token: 't', transport: 'carrier-pigeon', WebSocket: makeSocketClass() }), TypeError);
  assert.throws(() => new RoomcastClient('ws://x/ws', { anonymous: { appKey: 'k' }, transport: 'sse', fetch: makeFetch() }), TypeError);
  // Without a WebSocket class, "auto" uses the HTTP transports alone.
  const t = setup({ WebSocket: null, transport: 'auto' });
  t.client.connect();
  return settle().then(() => {
    assert.equal(t.fetch.calls.length, 1);
    assert.equal(t.fetch.calls[0].path, '/sse');
  });
});

test('TR-3: a refused WebSocket upgrade falls back to SSE at once; commands are posted with the same answers', async () => {
  const t = setup();
  assert.equal(t.client.transport, null);
  const { get } = await onSse(t);
  assert.equal(get.headers.Authorization, 'Bearer tok-1', 'the token goes in a header, not the URL');
  assert.deepEqual(get.query, {}, 'JSON encoding, no rooms named');
  assert.equal(t.client.transport, 'sse');
  assert.deepEqual(t.transports, ['sse']);
  assert.equal(t.client.state, 'connected');

  const joining = t.client.join('r1');
  const post = await answerOp(t.fetch, joinReply('r1', EPOCH, 5));
  assert.equal(post.method, 'POST');
  assert.equal(post.headers['X-Roomcast-Stream'], 'sse-1');
  assert.equal(post.headers.Authorization, 'Bearer tok-1');
  assert.deepEqual(post.body, { id: post.body.id, op: 'room.join', args: { roomId: 'r1' } });
  assert.deepEqual(await joining, joinReply('r1', EPOCH, 5));
  assert.deepEqual(t.client.position('r1'), { epoch: EPOCH, offset: 5, stream: CONNECTED.stream });

  const sending = caught(t.client.sendMessage('r1', 'hi'));
  await answerOp(t.fetch, null, { code: 40401, message: 'no such room', field: 'roomId' });
  const refused = await sending;
  assert.equal(refused.code, 40401);
  assert.equal(refused.field, 'roomId');

  // A stream that is gone: the post's 404 is "disconnected".
  const late = caught(t.client.sendMessage('r1', 'again'));
  await settle();
  t.fetch.to('/client/ops').at(-1).json(404, { code: 40412, message: 'no stream', field: 'stream' });
  assert.equal((await late).code, 'disconnected');
});

test('TR-3: commands are posted one at a time, in order, and the queue is bounded', async () => {
  const t = setup({ fallback: { maxQueuedOps: 1 } });
  await onSse(t);
  const a = t.client.sendMessage('r1', 'a');
  const b = t.client.sendMessage('r1', 'b');
  const c = t.client.sendMessage('r1', 'c');
  await assert.rejects(c, (e) => e.code === 'busy');
  await settle();
  assert.equal(t.fetch.to('/client/ops').length, 1, 'b waits for a');
  await answerOp(t.fetch, { messageId: 'm-a' });
  assert.deepEqual(await a, { messageId: 'm-a' });
  assert.equal(t.fetch.to('/client/ops').length, 2);
  assert.equal(t.fetch.to('/client/ops')[1].body.args.content, 'b');
  await answerOp(t.fetch, { messageId: 'm-b' });
  assert.deepEqual(await b, { messageId: 'm-b' });
});

test('TR-3: SSE events are delivered once; a cut stream resumes every room from the last offset delivered', async () => {
  const t = setup({ getToken: async () => 'tok-2' });
  const { stream } = await onSse(t);
  t.client.join('r1');
  await answerOp(t.fetch, joinReply('r1', EPOCH, 5));
  stream.push(sse('room.message', streamEvent('r1', EPOCH, 6)) + sse('room.message', streamEvent('r1', EPOCH, 7)));
  // Offset 8 is cut short: its blank line never comes.
  stream.push(sse('room.message', streamEvent('r1', EPOCH, 8)).slice(0, 30));
  await settle();
  stream.end();
  await settle();
  assert.deepEqual(t.messages, [6, 7]);
  assert.equal(t.states.at(-1).state, 'disconnected');
  assert.equal(t.states.at(-1).delayMs, 500, 'a cut after the hello is an ordinary reconnect, on the same transport');
  t.timers.advance(500);
  await settle();
  assert.equal(t.WS.instances.length, 1, 'no WebSocket attempt: the client stays on SSE');
  const again = t.fetch.lastTo('/sse');
  assert.equal(again.headers.Authorization, 'Bearer tok-2', 'a reconnect asks getToken');
  const s2 = again.stream();
  s2.push(sse('hello', { stream: 'sse-2', ok: CONNECTED }));
  await settle();
  const rejoin = t.fetch.lastTo('/client/ops');
  assert.equal(rejoin.headers['X-Roomcast-Stream'], 'sse-2');
  assert.deepEqual(rejoin.body.args, { roomId: 'r1', mode: 'join', resume: { epoch: EPOCH, stream: CONNECTED.stream, offset: 7 } });
  // The replay overlaps what was seen (7), then 8 and 9; the join answer comes after them.
  s2.push(sse('room.message', streamEvent('r1', EPOCH, 7)) + sse('room.message', streamEvent('r1', EPOCH, 8)));
  s2.push(sse('room.resume', { ev: 'room.resume', roomId: 'r1', data: { resumed: true, replayed: 2 } }));
  s2.push(sse('room.message', streamEvent('r1', EPOCH, 9)));
  await settle();
  await answerOp(t.fetch, joinReply('r1', EPOCH, 9));
  assert.deepEqual(t.messages, [6, 7, 8, 9], 'nothing lost, nothing twice');
  assert.deepEqual(t.transports, ['sse']);
});

test('TR-3: SSE that fails before its hello (twice) falls back to long-poll, which delivers everything', async () => {
  const t = setup();
  const connecting = t.client.connect();
  await settle();
  t.WS.last.serverClose(1006);
  t.timers.advance(0);
  await settle();
  // Something in between closes event streams before anything arrives.
  t.fetch.lastTo('/sse').stream().end();
  await settle();
  assert.equal(t.states.at(-1).delayMs, 500, 'one more SSE try after the backoff');
  t.timers.advance(500);
  await settle();
  assert.equal(t.fetch.to('/sse').length, 2);
  t.fetch.lastTo('/sse').stream(200, 'text/html').end(); // a proxy's page instead of the stream
  await settle();
  assert.equal(t.states.at(-1).delayMs, 0, 'then long-poll, at once');
  t.timers.advance(0);
  await settle();
  const first = t.fetch.lastTo('/poll');
  assert.deepEqual(first.query, { wait: '20' });
  assert.equal(first.headers.Authorization, 'Bearer tok-1');
  first.json(200, { stream: 'p-1', cursor: 'c1', events: [{ event: 'hello', data: { stream: 'p-1', ok: CONNECTED }, cursor: 'c1' }] });
  await settle();
  assert.deepEqual(await connecting, CONNECTED);
  assert.equal(t.client.transport, 'poll');
  assert.deepEqual(t.transports, ['poll']);

  t.client.join('r1');
  await settle();
  const second = t.fetch.lastTo('/poll');
  assert.deepEqual(second.query, { stream: 'p-1', cursor: 'c1', wait: '20' }, 'the next poll acknowledges the cursor');
  await answerOp(t.fetch, joinReply('r1', EPOCH, 5));
  second.json(200, { stream: 'p-1', cursor: 'c3', events: [
    { event: 'room.message', data: streamEvent('r1', EPOCH, 6), cursor: 'c2' },
    { event: 'room.message', data: streamEvent('r1', EPOCH, 7), cursor: 'c3' },
  ] });
  await settle();
  assert.deepEqual(t.messages, [6, 7]);
  const third = t.fetch.lastTo('/poll');
  assert.equal(third.query.cursor, 'c3');

  // The session ends (no poll reached it in time): a new one resumes from offset 7.
  third.json(404, { code: 40412, message: 'no stream', field: 'stream' });
  await settle();
  assert.equal(t.states.at(-1).state, 'disconnected');
  t.timers.advance(t.states.at(-1).delayMs);
  await settle();
  const reopen = t.fetch.lastTo('/poll');
  assert.equal(reopen.query.stream, undefined, 'a new session');
  reopen.json(200, { stream: 'p-2', cursor: 'd1', events: [{ event: 'hello', data: { stream: 'p-2', ok: CONNECTED }, cursor: 'd1' }] });
  await settle();
  const rejoin = t.fetch.lastTo('/client/ops');
  assert.deepEqual(rejoin.body.args.resume, { epoch: EPOCH, stream: CONNECTED.stream, offset: 7 });
  t.fetch.lastTo('/poll').json(200, { stream: 'p-2', cursor: 'd3', events: [
    { event: 'room.message', data: streamEvent('r1', EPOCH, 7), cursor: 'd2' },
    { event: 'room.message', data: streamEvent('r1', EPOCH, 8), cursor: 'd3' },
  ] });
  await answerOp(t.fetch, joinReply('r1', EPOCH, 8));
  assert.deepEqual(t.messages, [6, 7, 8]);
});

test('TR-3: on a fallback the WebSocket is probed with backoff; the client moves back without loss or duplicate', async () => {
  const t = setup({ fallback: { probe: { initialMs: 1000, maxMs: 4000, factor: 2, jitter: 0 } } });
  const { get, stream } = await onSse(t);
  t.client.join('r1');
  await answerOp(t.fetch, joinReply('r1', EPOCH, 5));
  stream.push(sse('room.message', streamEvent('r1', EPOCH, 6)));
  await settle();
  assert.equal(t.WS.instances.length, 1);

  // Probes that fail back off: 1000, 2000, 4000, 4000 (the cap).
  const probes = [];
  for (const delay of [1000, 2000, 4000, 4000]) {
    t.timers.advance(delay - 1);
    await settle();
    assert.equal(t.WS.instances.length, 1 + probes.length, `no probe before ${delay} ms`);
    t.timers.advance(1);
    await settle();
    assert.equal(t.WS.instances.length, 2 + probes.length, `a probe after ${delay} ms`);
    probes.push(t.WS.last);
    t.WS.last.serverClose(1006);
    await settle();
  }
  assert.equal(t.client.transport, 'sse', 'still on SSE');
  assert.equal(t.client.state, 'connected');

  t.timers.advance(4000);
  await settle();
  const ws = t.WS.last;
  ws.open();
  assert.equal(ws.frames[0].op, 'connect');
  assert.equal(ws.frames[0].args.token, 'tok-1');
  // An event the old stream delivers before the move counts as delivered.
  stream.push(sse('room.message', streamEvent('r1', EPOCH, 7)));
  await settle();
  ws.answerLast(CONNECTED);
  await settle();
  assert.equal(t.client.transport, 'websocket');
  assert.deepEqual(t.transports, ['sse', 'websocket']);
  assert.ok(get.aborted, 'the SSE stream is closed');
  const join = ws.frames.at(-1);
  assert.deepEqual(join.args, { roomId: 'r1', mode: 'join', resume: { epoch: EPOCH, stream: CONNECTED.stream, offset: 7 } });
  ws.receive(streamEvent('r1', EPOCH, 7));
  ws.receive(streamEvent('r1', EPOCH, 8));
  ws.receive({ id: join.id, ok: joinReply('r1', EPOCH, 8) });
  ws.receive(streamEvent('r1', EPOCH, 9));
  assert.deepEqual(t.messages, [6, 7, 8, 9]);
  assert.equal(t.states.filter((s) => s.state === 'disconnected').length, 1, 'only the refused upgrade; the move kept the state');
  // Commands now go on the socket.
  t.client.sendMessage('r1', 'over ws');
  assert.equal(ws.lastFrame.op, 'room.send');
  assert.equal(t.fetch.to('/client/ops').length, 1);
});

test('TR-3: a command posted when the WebSocket answers is answered first; queued ones move to the socket', async () => {
  const t = setup({ fallback: { probe: { initialMs: 1000, jitter: 0 } } });
  await onSse(t);
  const a = t.client.sendMessage('r1', 'a');
  const b = t.client.sendMessage('r1', 'b');
  await settle();
  t.timers.advance(1000);
  await settle();
  const ws = t.WS.last;
  ws.open();
  ws.answerLast(CONNECTED);
  await settle();
  assert.equal(t.client.transport, 'sse', 'the move waits for the answer of a');
  await answerOp(t.fetch, { messageId: 'm-a' });
  assert.deepEqual(await a, { messageId: 'm-a' });
  assert.equal(t.client.transport, 'websocket');
  assert.equal(t.fetch.to('/client/ops').length, 1, 'b was not posted');
  assert.equal(ws.lastFrame.op, 'room.send');
  assert.equal(ws.lastFrame.args.content, 'b');
  ws.answerLast({ messageId: 'm-b' });
  assert.deepEqual(await b, { messageId: 'm-b' });
});

test('TR-3: bounded retries: each round tries every transport once, then backs off up to the cap', async () => {
  const t = setup({ backoff: { initialMs: 100, maxMs: 400, factor: 2, jitter: 0 } });
  t.client.connect().catch(() => {});
  const kinds = [];
  const delays = [];
  for (let round = 0; round < 4; round++) {
    await settle();
    kinds.push('websocket');
    t.WS.last.serverClose(1006);
    delays.push(t.states.at(-1).delayMs);
    t.timers.advance(0);
    await settle();
    kinds.push(t.fetch.calls.at(-1).path);
    t.fetch.calls.at(-1).fail(); // the server cannot be reached at all
    await settle();
    delays.push(t.states.at(-1).delayMs);
    t.timers.advance(0);
    await settle();
    kinds.push(t.fetch.calls.at(-1).path);
    t.fetch.calls.at(-1).fail();
    await settle();
    delays.push(t.states.at(-1).delayMs);
    t.timers.advance(t.states.at(-1).delayMs);
  }
  assert.deepEqual(kinds, Array(4).fill(['websocket', '/sse', '/poll']).flat());
  assert.deepEqual(delays, [0, 0, 100, 0, 0, 200, 0, 0, 400, 0, 0, 400]);
  assert.equal(t.WS.instances.length, 4);
  assert.equal(t.fetch.calls.length, 8);
});

test('TR-3: a WebSocket that opens but never completes its connect counts as failed after the handshake bound', async () => {
  const t = setup({ fallback: { handshakeTimeoutMs: 3000 } });
  t.client.connect().catch(() => {});
  await settle();
  t.WS.last.open(); // upgraded, but the connect answer never comes
  t.timers.advance(3000);
  await settle();
  assert.equal(t.states.at(-1).state, 'disconnected');
  assert.equal(t.states.at(-1).delayMs, 500, 'reached the server: tried again once');
  t.timers.advance(500);
  await settle();
  assert.equal(t.WS.instances.length, 2);
  t.WS.last.open();
  t.timers.advance(3000);
  await settle();
  assert.equal(t.states.filter((s) => s.state === 'disconnected').at(-1).delayMs, 0, 'the second time: SSE at once');
  assert.equal(t.fetch.to('/sse').length, 1);
  // A stream whose hello never comes is bounded the same way.
  t.fetch.lastTo('/sse').stream();
  t.timers.advance(3000);
  await settle();
  assert.ok(t.fetch.lastTo('/sse').aborted);
});

test('TR-3: token refresh on SSE: token.refresh is posted with the new token, later posts use it', async () => {
  let n = 1;
  const t = setup({ getToken: async () => `tok-${++n}` });
  const { get, stream } = await onSse(t);
  assert.equal(get.headers.Authorization, 'Bearer tok-2', 'the SSE attempt asked getToken');
  stream.push(sse('token.expired', { ev: 'token.expired', data: { graceSeconds: 30 } }));
  await settle();
  const refresh = t.fetch.lastTo('/client/ops');
  assert.equal(refresh.body.op, 'token.refresh');
  assert.deepEqual(refresh.body.args, { token: 'tok-3' });
  assert.equal(refresh.headers.Authorization, 'Bearer tok-3', 'the old token may have expired');
  await answerOp(t.fetch, {});
  t.client.sendMessage('r1', 'x').catch(() => {});
  await settle();
  assert.equal(t.fetch.lastTo('/client/ops').headers.Authorization, 'Bearer tok-3');
  assert.deepEqual(t.errors, []);
});

test('TR-3: refusals of the HTTP session are final as on a WebSocket; the stream\'s close event carries its code', async () => {
  const t = setup();
  const connecting = t.client.connect();
  await settle();
  t.WS.last.serverClose(1006);
  t.timers.advance(0);
  await settle();
  t.fetch.lastTo('/sse').json(401, { code: 40105, message: 'invalid token', field: 'token' });
  await assert.rejects(connecting, (e) => e.code === 40105);
  assert.equal(t.states.at(-1).willReconnect, false);

  const u = setup();
  const { stream } = await onSse(u);
  stream.push(sse('close', { code: 4010, reason: 'disconnected by the app' }));
  await settle();
  assert.equal(u.states.at(-1).code, 4010);
  assert.equal(u.states.at(-1).willReconnect, false);
});

test('TR-3: compact events over SSE wait for their join answer as on a WebSocket', async () => {
  const t = setup({ encoding: 'compact' });
  const { get, stream } = await onSse(t);
  assert.deepEqual(get.query, { encoding: 'compact' });
  const joining = t.client.join('r1');
  await settle();
  // The compact event comes before the answer that names the epoch.
  stream.push(sse('room.message', { m: 'r1', o: 6, i: 'm6', s: 'u2', c: 'hello', t: 1 }));
  await settle();
  assert.deepEqual(t.messages, []);
  await answerOp(t.fetch, joinReply('r1', EPOCH, 5));
  await joining;
  assert.deepEqual(t.messages, [6]);
  assert.deepEqual(t.client.position('r1'), { epoch: EPOCH, offset: 6, stream: CONNECTED.stream });
});

test('TR-3: buffers are bounded: an oversized stream event drops the stream', async () => {
  const t = setup({ fallback: { maxEventBytes: 300 } });
  const { stream } = await onSse(t);
  stream.push(`event: room.message\ndata: ${'x'.repeat(400)}`);
  await settle();
  assert.equal(t.states.at(-1).state, 'disconnected');
  assert.equal(t.states.at(-1).willReconnect, true);
});

test('TR-3: transport "websocket" never uses HTTP; "sse" and "poll" never open a WebSocket', async () => {
  const w = setup({ transport: 'websocket' });
  w.client.connect().catch(() => {});
  await settle();
  w.WS.last.serverClose(1006);
  w.timers.advance(60_000);
  await settle();
  assert.equal(w.fetch.calls.length, 0);
  assert.equal(w.WS.instances.length, 2);

  for (const kind of ['sse', 'poll']) {
    const t = setup({ transport: kind });
    t.client.connect().catch(() => {});
    await settle();
    assert.equal(t.WS.instances.length, 0);
    assert.equal(t.fetch.calls[0].path, `/${kind}`);
    t.fetch.calls[0].fail();
    await settle();
    t.timers.advance(60_000);
    await settle();
    assert.equal(t.fetch.calls.at(-1).path, `/${kind}`);
    assert.equal(t.WS.instances.length, 0);
  }
});

test('TR-3: a WebSocket lost while the move waits for a posted answer: posting goes on over SSE', async () => {
  const t = setup({ fallback: { probe: { initialMs: 1000, jitter: 0 } } });
  await onSse(t);
  const a = t.client.sendMessage('r1', 'a');
  const b = t.client.sendMessage('r1', 'b');
  await settle();
  t.timers.advance(1000);
  await settle();
  const ws = t.WS.last;
  ws.open();
  ws.answerLast(CONNECTED);
  await settle();
  ws.serverClose(1006); // gone before a's answer came
  await settle();
  await answerOp(t.fetch, { messageId: 'm-a' });
  assert.deepEqual(await a, { messageId: 'm-a' });
  assert.equal(t.client.transport, 'sse');
  assert.equal(t.fetch.to('/client/ops').length, 2, 'b is posted');
  await answerOp(t.fetch, { messageId: 'm-b' });
  assert.deepEqual(await b, { messageId: 'm-b' });
  assert.ok(t.timers.pending().includes(2000), 'the next probe is scheduled, backed off');
});

test('TR-3: sessions cut right after their hello, before delivering anything, count towards the fallback', async () => {
  const t = setup();
  const connecting = t.client.connect();
  await settle();
  // The WebSocket's connect is answered, then the socket is cut before any event, twice.
  t.WS.last.open();
  t.WS.last.answerLast(CONNECTED);
  assert.deepEqual(await connecting, CONNECTED);
  t.WS.last.serverClose(1006);
  assert.equal(t.states.at(-1).delayMs, 500);
  t.timers.advance(500);
  await settle();
  t.WS.last.open();
  t.WS.last.answerLast(CONNECTED);
  await settle();
  t.WS.last.serverClose(1006);
  assert.equal(t.states.at(-1).delayMs, 0, 'SSE at once');
  t.timers.advance(0);
  await settle();
  // The same on SSE: the hello, then the stream ends.
  for (const delay of [1000, 0]) {
    const stream = t.fetch.lastTo('/sse').stream();
    stream.push(sse('hello', { stream: 's', ok: CONNECTED }));
    await settle();
    stream.end();
    await settle();
    assert.equal(t.states.at(-1).delayMs, delay, 'the backoff kept growing, then long-poll at once');
    t.timers.advance(delay);
    await settle();
  }
  assert.equal(t.fetch.calls.at(-1).path, '/poll');
  // A session that delivered an event is a success: its cut is an ordinary reconnect.
  t.fetch.lastTo('/poll').json(200, { stream: 'p', cursor: 'c1', events: [
    { event: 'hello', data: { stream: 'p', ok: CONNECTED }, cursor: 'c1' },
    { event: 'conversation.statusSynced', data: { ev: 'conversation.statusSynced', data: { code: 0, cursor: 1 } }, cursor: 'c1' },
  ] });
  await settle();
  t.fetch.lastTo('/poll').fail();
  await settle();
  assert.equal(t.states.at(-1).delayMs, 500);
  t.timers.advance(500);
  await settle();
  assert.equal(t.fetch.calls.at(-1).path, '/poll', 'still long-poll');
});

test('TR-3: the event stream parser: pieces split anywhere, CRLF, heartbeats, multi-line data', async () => {
  const t = setup();
  const { stream } = await onSse(t);
  t.client.join('r1');
  await answerOp(t.fetch, joinReply('r1', EPOCH, 5));
  const text = `: heartbeat\r\n\r\n${sse('room.message', streamEvent('r1', EPOCH, 6)).replaceAll('\n', '\r\n')}`
    + 'event: room.message\ndata: {"ev":"room.message","roomId":"r1",\ndata: "epoch":"e1","offset":7,"data":{"message":{}}}\n\n'
    + sse('room.message', streamEvent('r1', EPOCH, 8));
  // One character at a time: every CRLF is split too.
  for (const ch of text) stream.push(ch);
  await settle(10);
  assert.deepEqual(t.messages, [6, 7, 8]);
  assert.deepEqual(t.errors, []);
});

test('TR-3: compact events waiting for a join answer that never comes are released when it times out', async () => {
  const t = setup({ encoding: 'compact', requestTimeoutMs: 5000 });
  const { stream } = await onSse(t);
  const joining = caught(t.client.join('r1'));
  await settle();
  stream.push(sse('room.message', { m: 'r1', o: 6, i: 'm6', s: 'u2', c: 'hello', t: 1 }));
  await settle();
  assert.deepEqual(t.messages, []);
  t.timers.advance(5000);
  assert.equal((await joining).code, 'timeout');
  assert.deepEqual(t.messages, [6]);
});
