// Commands as promises: frames, ids, answer matching, errors, timeouts, disconnects (BX-4).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RoomcastClient, RoomcastError } from '../roomcast.js';
import { connectedClient, makeSocketClass, fakeTimers, flush } from './fakes.mjs';

test('commands are sent as {id, op, args} with increasing ids, and resolve with ok', async () => {
  const { client, ws } = await connectedClient();
  const a = client.send('room.info', { roomId: 'r1' });
  const b = client.send('room.members', { roomId: 'r1', limit: 5 });
  assert.deepEqual(ws.sent.slice(1), [
    '{"id":2,"op":"room.info","args":{"roomId":"r1"}}',
    '{"id":3,"op":"room.members","args":{"roomId":"r1","limit":5}}',
  ]);
  ws.receive({ id: 2, ok: { room: { roomId: 'r1' } } });
  ws.receive({ id: 3, ok: { members: [] } });
  assert.deepEqual(await a, { room: { roomId: 'r1' } });
  assert.deepEqual(await b, { members: [] });
});

test('answers are matched by id, also when they come out of order', async () => {
  const { client, ws } = await connectedClient();
  const results = [];
  const p1 = client.send('room.info', { roomId: 'a' }).then((ok) => results.push(['a', ok]));
  const p2 = client.send('room.info', { roomId: 'b' }).then((ok) => results.push(['b', ok]));
  const p3 = client.send('room.info', { roomId: 'c' }).then((ok) => results.push(['c', ok]));
  const [f1, f2, f3] = ws.frames.slice(1);
  ws.receive({ id: f3.id, ok: { n: 3 } });
  ws.receive({ id: f1.id, ok: { n: 1 } });
  ws.receive({ id: f2.id, ok: { n: 2 } });
  await Promise.all([p1, p2, p3]);
  assert.deepEqual(results, [['c', { n: 3 }], ['a', { n: 1 }], ['b', { n: 2 }]]);
});

test('an error answer rejects with a RoomcastError carrying code, message and field', async () => {
  const { client, ws } = await connectedClient();
  const p = client.send('room.send', { roomId: 'r1', content: 'hi' });
  ws.receive({ id: ws.lastFrame.id, error: { code: 23406, message: 'not in room r1', field: 'roomId' } });
  await assert.rejects(p, (err) => {
    assert.ok(err instanceof RoomcastError);
    assert.equal(err.code, 23406);
    assert.equal(err.message, 'not in room r1');
    assert.equal(err.field, 'roomId');
    return true;
  });
});

test('no answer within requestTimeoutMs rejects with code "timeout"; a late answer is ignored', async () => {
  const { client, ws, timers, errors } = await connectedClient({ requestTimeoutMs: 2500 });
  const p = client.send('room.info', { roomId: 'r1' });
  let settled = false;
  p.catch(() => {}).finally(() => { settled = true; });
  timers.advance(2499);
  await flush();
  assert.equal(settled, false);
  timers.advance(1);
  await assert.rejects(p, (err) => err instanceof RoomcastError && err.code === 'timeout');
  ws.receive({ id: ws.lastFrame.id, ok: {} });
  assert.deepEqual(errors, []);
  assert.equal(client.state, 'connected');
});

test('pending commands reject with "disconnected" when the socket closes before the answer', async () => {
  const { client, ws } = await connectedClient();
  const a = client.send('room.info', { roomId: 'r1' });
  const b = client.send('room.history', { roomId: 'r1' });
  ws.serverClose(1006);
  await assert.rejects(a, (err) => err.code === 'disconnected');
  await assert.rejects(b, (err) => err.code === 'disconnected');
});

/** How a promise settles within one turn of the event loop: its error code, "resolved" or "pending". */
const outcomeNow = (promise) => Promise.race([
  promise.then(() => 'resolved', (err) => err.code),
  flush().then(() => 'pending'),
]);

test('commands while not connected reject at once with "disconnected" and send nothing', async () => {
  const WS = makeSocketClass();
  const timers = fakeTimers();
  const client = new RoomcastClient('ws://x/ws', { token: 't', transport: 'websocket', WebSocket: WS, setTimeout: timers.setTimeout, clearTimeout: timers.clearTimeout });
  assert.equal(await outcomeNow(client.send('room.info', { roomId: 'r' })), 'disconnected');
  const connecting = client.connect();
  await flush();
  WS.last.open();
  // Connecting, but the connect answer has not come: still refused, still nothing sent.
  assert.equal(await outcomeNow(client.join('r')), 'disconnected');
  assert.deepEqual(WS.last.frames.map((f) => f.op), ['connect']);
  WS.last.answerLast({ sessionId: 's', userId: 'u', anonymous: false, stream: 'S', expiresAt: null });
  await connecting;
  client.close();
  assert.equal(await outcomeNow(client.leave('r')), 'disconnected');
  assert.deepEqual(WS.last.frames.map((f) => f.op), ['connect']);
});

test('an error answer with id null is emitted as an error event', async () => {
  const { ws, errors } = await connectedClient();
  ws.receive({ id: null, error: { code: 40000, message: 'not a protocol message' } });
  assert.equal(errors.length, 1);
  assert.equal(errors[0].type, 'protocol');
  assert.equal(errors[0].error.code, 40000);
  assert.equal(errors[0].error.message, 'not a protocol message');
});

test('an unreadable frame is emitted as an error event', async () => {
  const { ws, errors, client } = await connectedClient();
  ws.receive('{not json');
  assert.equal(errors.length, 1);
  assert.equal(errors[0].type, 'protocol');
  assert.equal(client.state, 'connected');
});

test('convenience methods send the documented ops and args', async () => {
  const { client, ws } = await connectedClient();
  const calls = [
    () => client.join('r1', { mode: 'enter', nickname: 'Ann' }),
    () => client.leave('r1'),
    () => client.leaveAll(),
    () => client.switchRoom('r1', 'r2', { createIfMissing: true }),
    () => client.switchRoom('r1', { roomId: 'r3', name: 'Three' }),
    () => client.sendMessage('r1', 'hello'),
    () => client.sendMessage('r1', '{"x":1}', 'custom'),
    () => client.history('r1', { limit: 10, order: 'desc' }),
    () => client.members('r1', { limit: 50 }),
    () => client.roomInfo('r1'),
    () => client.setAttributes('r1', { k: 'v' }, { autoDelete: true }),
    () => client.removeAttributes('r1', ['k']),
    () => client.getAttributes('r1'),
    () => client.getAttributes('r1', ['k']),
    () => client.observe('r9'),
    () => client.unobserve('r9'),
    () => client.refreshToken('tok-2'),
  ];
  for (const call of calls) call().catch(() => {});
  assert.deepEqual(ws.frames.slice(1).map(({ op, args }) => [op, args]), [
    ['room.join', { roomId: 'r1', mode: 'enter', nickname: 'Ann' }],
    ['room.leave', { roomId: 'r1' }],
    ['room.leaveAll', {}],
    ['room.switch', { from: 'r1', to: { roomId: 'r2' }, createIfMissing: true }],
    ['room.switch', { from: 'r1', to: { roomId: 'r3', name: 'Three' } }],
    ['room.send', { roomId: 'r1', content: 'hello' }],
    ['room.send', { roomId: 'r1', content: '{"x":1}', type: 'custom' }],
    ['room.history', { roomId: 'r1', limit: 10, order: 'desc' }],
    ['room.members', { roomId: 'r1', limit: 50 }],
    ['room.info', { roomId: 'r1' }],
    ['attributes.set', { roomId: 'r1', entries: { k: 'v' }, autoDelete: true }],
    ['attributes.remove', { roomId: 'r1', keys: ['k'] }],
    ['attributes.get', { roomId: 'r1' }],
    ['attributes.get', { roomId: 'r1', keys: ['k'] }],
    ['room.observe', { roomId: 'r9' }],
    ['room.unobserve', { roomId: 'r9' }],
    ['token.refresh', { token: 'tok-2' }],
  ]);
  assert.deepEqual(ws.frames.map((f) => f.id), Array.from({ length: calls.length + 1 }, (_, i) => i + 1));
  client.close();
});

test('events are emitted by name with the whole frame; off() removes a handler; "*" sees every event', async () => {
  const { client, ws } = await connectedClient();
  const seen = [];
  const all = [];
  const handler = (frame) => seen.push(frame);
  client.on('group.channelDisbanded', handler);
  client.on('*', (frame) => all.push(frame.ev));
  const frame = { ev: 'group.channelDisbanded', data: { infoList: [{ groupId: 'g', channelId: 'c' }] } };
  ws.receive(frame);
  client.off('group.channelDisbanded', handler);
  ws.receive(frame);
  ws.receive({ ev: 'some.futureEvent', data: {} });
  assert.deepEqual(seen, [frame]);
  assert.deepEqual(all, ['group.channelDisbanded', 'group.channelDisbanded', 'some.futureEvent']);
});

test('a handler that throws is reported as an error event and does not stop the others', async () => {
  const { client, ws, errors } = await connectedClient();
  const seen = [];
  client.on('room.status', () => { throw new Error('app bug'); });
  client.on('room.status', (f) => seen.push(f.data.status));
  ws.receive({ ev: 'room.status', roomId: 'r', data: { status: 'joining' } });
  assert.deepEqual(seen, ['joining']);
  assert.equal(errors.length, 1);
  assert.equal(errors[0].type, 'handler');
  assert.equal(errors[0].event, 'room.status');
});
