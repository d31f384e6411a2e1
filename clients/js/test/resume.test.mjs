// BX-1 resume bookkeeping: positions, re-join with resume after a reconnect, duplicates dropped,
// rooms forgotten, observed rooms.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connectedClient, reconnect, record, joinReply, streamEvent, flush, CONNECTED } from './fakes.mjs';

/** Joins a room and answers the join at a stream position. */
async function joinAt(ctx, roomId, epoch, offset, opts) {
  const p = ctx.client.join(roomId, opts);
  ctx.ws.answerLast(joinReply(roomId, epoch, offset));
  await p;
}

/** The frames the client sent after its connect on a socket, as [op, args]. */
const afterConnect = (ws) => ws.frames.slice(1).map(({ op, args }) => [op, args]);

test('after a reconnect a room is re-joined with resume from the join answer position', async () => {
  const ctx = await connectedClient();
  await joinAt(ctx, 'r1', 'E1', 10);
  assert.deepEqual(ctx.client.position('r1'), { epoch: 'E1', offset: 10, stream: 'stream-A' });
  ctx.ws.serverClose(1006);
  const ws2 = await reconnect(ctx.WS, ctx.timers);
  assert.deepEqual(ws2.frames.slice(1), [
    { id: 4, op: 'room.join', args: { roomId: 'r1', mode: 'join', resume: { epoch: 'E1', stream: 'stream-A', offset: 10 } } },
  ]);
  assert.equal(ws2.sent[1], '{"id":4,"op":"room.join","args":{"roomId":"r1","mode":"join","resume":{"epoch":"E1","stream":"stream-A","offset":10}}}');
});

test('events advance the position (gaps are normal) and the re-join resumes from the last one seen', async () => {
  const ctx = await connectedClient();
  const seen = record(ctx.client, 'room.message', 'room.attributes');
  await joinAt(ctx, 'r1', 'E1', 10);
  ctx.ws.receive(streamEvent('r1', 'E1', 11));
  ctx.ws.receive(streamEvent('r1', 'E1', 14)); // 12 and 13 excluded this client
  ctx.ws.receive(streamEvent('r1', 'E1', 15, 'room.attributes', { operator: 'u2', updated: { k: 'v' }, removed: [], time: 1 }));
  assert.deepEqual(seen.map((f) => f.offset), [11, 14, 15]);
  ctx.ws.serverClose(4008);
  const ws2 = await reconnect(ctx.WS, ctx.timers);
  assert.deepEqual(afterConnect(ws2), [['room.join', { roomId: 'r1', mode: 'join', resume: { epoch: 'E1', stream: 'stream-A', offset: 15 } }]]);
});

test('a replay overlapping what was seen delivers every missed event exactly once, in order', async () => {
  const ctx = await connectedClient();
  const seen = record(ctx.client, 'room.message', 'room.resume');
  await joinAt(ctx, 'r1', 'E1', 0);
  ctx.ws.receive(streamEvent('r1', 'E1', 1));
  ctx.ws.receive(streamEvent('r1', 'E1', 2));
  ctx.ws.serverClose(1001);
  const ws2 = await reconnect(ctx.WS, ctx.timers);
  const rejoin = ws2.lastFrame;
  assert.deepEqual(rejoin.args.resume, { epoch: 'E1', stream: 'stream-A', offset: 2 });
  // The server replays (here overlapping by two), says how it went, then answers the join.
  for (const o of [1, 2, 3, 4]) ws2.receive(streamEvent('r1', 'E1', o));
  ws2.receive({ ev: 'room.resume', roomId: 'r1', data: { resumed: true, replayed: 2 } });
  ws2.receive({ id: rejoin.id, ok: joinReply('r1', 'E1', 4) });
  ws2.receive(streamEvent('r1', 'E1', 4)); // a duplicate arriving late
  ws2.receive(streamEvent('r1', 'E1', 5));
  assert.deepEqual(seen.map((f) => (f.ev === 'room.resume' ? `resume:${f.data.replayed}` : f.offset)), [1, 2, 3, 4, 'resume:2', 5]);
  assert.deepEqual(ctx.client.position('r1'), { epoch: 'E1', offset: 5, stream: 'stream-A' });
});

test('a replay answered after the join answer is still delivered (the answer does not move the position back or forward)', async () => {
  const ctx = await connectedClient();
  const seen = record(ctx.client, 'room.message');
  await joinAt(ctx, 'r1', 'E1', 7);
  ctx.ws.serverClose(1006);
  const ws2 = await reconnect(ctx.WS, ctx.timers);
  ws2.answerLast(joinReply('r1', 'E1', 9));
  ws2.receive(streamEvent('r1', 'E1', 8));
  ws2.receive(streamEvent('r1', 'E1', 9));
  assert.deepEqual(seen.map((f) => f.offset), [8, 9]);
});

test('resume refused (outOfWindow): the position restarts from the re-join answer', async () => {
  const ctx = await connectedClient();
  await joinAt(ctx, 'r1', 'E1', 3);
  ctx.ws.serverClose(1006);
  const ws2 = await reconnect(ctx.WS, ctx.timers);
  const seen = record(ctx.client, 'room.message', 'room.resume');
  ws2.receive({ ev: 'room.resume', roomId: 'r1', data: { resumed: false, replayed: 0, reason: 'outOfWindow' } });
  ws2.answerLast(joinReply('r1', 'E1', 900));
  assert.deepEqual(ctx.client.position('r1'), { epoch: 'E1', offset: 900, stream: 'stream-A' });
  ws2.receive(streamEvent('r1', 'E1', 900)); // at the answer's position: already counted
  ws2.receive(streamEvent('r1', 'E1', 901));
  assert.deepEqual(seen.map((f) => f.offset ?? f.data.reason), ['outOfWindow', 901]);
});

test('epoch changed (room recreated): reset status, new epoch from the answer, next resume in the new epoch', async () => {
  const ctx = await connectedClient();
  await joinAt(ctx, 'r1', 'E1', 50);
  ctx.ws.serverClose(1006);
  let ws = await reconnect(ctx.WS, ctx.timers);
  const seen = record(ctx.client, 'room.message', 'room.status', 'room.resume');
  ws.receive({ ev: 'room.status', roomId: 'r1', data: { status: 'reset', zimState: 'connecting', zimEvent: 'success', time: 1 } });
  ws.receive({ ev: 'room.resume', roomId: 'r1', data: { resumed: false, replayed: 0, reason: 'epochChanged' } });
  ws.answerLast(joinReply('r1', 'E2', 0));
  ws.receive(streamEvent('r1', 'E2', 1));
  assert.deepEqual(seen.map((f) => f.ev), ['room.status', 'room.resume', 'room.message']);
  assert.deepEqual(ctx.client.rooms, ['r1']);
  ws.serverClose(1006);
  ws = await reconnect(ctx.WS, ctx.timers);
  assert.deepEqual(ws.lastFrame.args, { roomId: 'r1', mode: 'join', resume: { epoch: 'E2', stream: 'stream-A', offset: 1 } });
});

test('the resume names the stream of the connection the position was recorded on', async () => {
  const ctx = await connectedClient();
  await joinAt(ctx, 'r1', 'E1', 5);
  ctx.ws.serverClose(1006);
  const restarted = { ...CONNECTED, stream: 'stream-B' };
  let ws = await reconnect(ctx.WS, ctx.timers, restarted);
  assert.equal(ws.lastFrame.args.resume.stream, 'stream-A');
  ws.receive({ ev: 'room.resume', roomId: 'r1', data: { resumed: false, replayed: 0, reason: 'serverRestarted' } });
  ws.answerLast(joinReply('r1', 'E1', 2));
  assert.deepEqual(ctx.client.position('r1'), { epoch: 'E1', offset: 2, stream: 'stream-B' });
  ws.serverClose(1006);
  ws = await reconnect(ctx.WS, ctx.timers, restarted);
  assert.deepEqual(ws.lastFrame.args.resume, { epoch: 'E1', stream: 'stream-B', offset: 2 });
});

test('the re-join repeats the profile of the original join, always with mode join', async () => {
  const ctx = await connectedClient();
  await joinAt(ctx, 'r1', 'E1', 0, { mode: 'enter', room: { name: 'R' }, nickname: 'Ann', avatar: 'a.png', ext: 'x', notifyExt: 'n' });
  ctx.ws.serverClose(1006);
  const ws2 = await reconnect(ctx.WS, ctx.timers);
  assert.deepEqual(afterConnect(ws2), [['room.join', {
    roomId: 'r1', nickname: 'Ann', avatar: 'a.png', ext: 'x', mode: 'join', resume: { epoch: 'E1', stream: 'stream-A', offset: 0 },
  }]]);
});

test('without a known offset (no joinInfo.offset, no event yet) the re-join has no resume', async () => {
  const ctx = await connectedClient();
  const p = ctx.client.join('r1');
  const reply = joinReply('r1', 'E1', 0);
  delete reply.joinInfo.offset;
  ctx.ws.answerLast(reply);
  await p;
  assert.deepEqual(ctx.client.position('r1'), { epoch: 'E1', offset: null, stream: 'stream-A' });
  ctx.ws.serverClose(1006);
  const ws2 = await reconnect(ctx.WS, ctx.timers);
  assert.deepEqual(afterConnect(ws2), [['room.join', { roomId: 'r1', mode: 'join' }]]);
});

test('every room is re-joined, in join order, before the app can send anything', async () => {
  const ctx = await connectedClient();
  await joinAt(ctx, 'a', 'Ea', 1);
  await joinAt(ctx, 'b', 'Eb', 2);
  ctx.client.on('state', (s) => {
    if (s.state === 'connected') ctx.client.sendMessage('a', 'back').catch(() => {});
  });
  ctx.ws.serverClose(1006);
  const ws2 = await reconnect(ctx.WS, ctx.timers);
  assert.deepEqual(ws2.frames.slice(1).map((f) => [f.op, f.args.roomId]), [['room.join', 'a'], ['room.join', 'b'], ['room.send', 'a']]);
});

test('rooms are forgotten after leave, leaveAll, switch, kick, quit and destroy', async () => {
  const ctx = await connectedClient();
  for (const r of ['leave', 'from', 'kicked', 'quit', 'destroyed', 'kept']) await joinAt(ctx, r, 'E', 1);
  const leave = ctx.client.leave('leave');
  ctx.ws.answerLast({});
  await leave;
  const sw = ctx.client.switchRoom('from', 'to');
  ctx.ws.answerLast(joinReply('to', 'Eto', 30));
  await sw;
  ctx.ws.receive({ ev: 'room.kicked', roomId: 'kicked', data: { reason: 2, time: 1 } });
  ctx.ws.receive({ ev: 'room.status', roomId: 'quit', data: { status: 'quit', zimState: 'disconnected', zimEvent: 'success', time: 1 } });
  ctx.ws.receive({ ev: 'room.status', roomId: 'destroyed', data: { status: 'destroyed', destroyType: 'manual', zimState: 'disconnected', zimEvent: 'success', time: 1 } });
  ctx.ws.receive({ ev: 'room.status', roomId: 'kept', data: { status: 'joined', zimState: 'connected', zimEvent: 'success', time: 1 } });
  assert.deepEqual(ctx.client.rooms, ['kept', 'to']);
  assert.equal(ctx.client.position('kicked'), undefined);
  ctx.ws.serverClose(1006);
  let ws = await reconnect(ctx.WS, ctx.timers);
  assert.deepEqual(afterConnect(ws), [
    ['room.join', { roomId: 'kept', mode: 'join', resume: { epoch: 'E', stream: 'stream-A', offset: 1 } }],
    ['room.join', { roomId: 'to', mode: 'join', resume: { epoch: 'Eto', stream: 'stream-A', offset: 30 } }],
  ]);
  const [kept, to] = ws.frames.slice(1);
  ws.receive({ id: kept.id, ok: joinReply('kept', 'E', 1) });
  ws.receive({ id: to.id, ok: joinReply('to', 'Eto', 30) });
  const all = ctx.client.leaveAll();
  ws.answerLast({ roomIds: ['kept', 'to'] });
  await all;
  assert.deepEqual(ctx.client.rooms, []);
  ws.serverClose(1006);
  ws = await reconnect(ctx.WS, ctx.timers);
  assert.deepEqual(afterConnect(ws), []);
});

test('a failed join or leave changes nothing in the bookkeeping', async () => {
  const ctx = await connectedClient();
  await joinAt(ctx, 'r1', 'E', 1);
  const leave = ctx.client.leave('r1');
  ctx.ws.receive({ id: ctx.ws.lastFrame.id, error: { code: 50301, message: 'try again' } });
  await assert.rejects(leave);
  const join = ctx.client.join('r2');
  ctx.ws.receive({ id: ctx.ws.lastFrame.id, error: { code: 23410, message: 'room r2 does not exist', field: 'roomId' } });
  await assert.rejects(join);
  assert.deepEqual(ctx.client.rooms, ['r1']);
});

test('a refused re-join is reported as an error event with the room id, and the room is forgotten', async () => {
  const ctx = await connectedClient();
  await joinAt(ctx, 'gone', 'E', 1);
  await joinAt(ctx, 'ok', 'E', 1);
  ctx.ws.serverClose(1006);
  let ws = await reconnect(ctx.WS, ctx.timers);
  const [gone, ok] = ws.frames.slice(1);
  ws.receive({ id: gone.id, error: { code: 23409, message: 'you are blocked from room gone', field: 'roomId' } });
  ws.receive({ id: ok.id, ok: joinReply('ok', 'E', 1) });
  await flush();
  assert.equal(ctx.errors.length, 1);
  assert.equal(ctx.errors[0].type, 'rejoin');
  assert.equal(ctx.errors[0].roomId, 'gone');
  assert.equal(ctx.errors[0].error.code, 23409);
  assert.deepEqual(ctx.client.rooms, ['ok']);
  ws.serverClose(1006);
  ws = await reconnect(ctx.WS, ctx.timers);
  assert.deepEqual(ws.frames.slice(1).map((f) => f.args.roomId), ['ok']);
});

test('a re-join cut off by another disconnect keeps the room for the next reconnect', async () => {
  const ctx = await connectedClient();
  await joinAt(ctx, 'r1', 'E', 4);
  ctx.ws.serverClose(1006);
  let ws = await reconnect(ctx.WS, ctx.timers);
  ws.serverClose(1006);
  ws = await reconnect(ctx.WS, ctx.timers);
  assert.deepEqual(afterConnect(ws), [['room.join', { roomId: 'r1', mode: 'join', resume: { epoch: 'E', stream: 'stream-A', offset: 4 } }]]);
  assert.deepEqual(ctx.errors, []);
});

test('observed rooms: position from the answer, duplicates dropped, observed again (no resume) after a reconnect', async () => {
  const ctx = await connectedClient();
  const seen = record(ctx.client, 'room.message');
  const p = ctx.client.observe('watched');
  ctx.ws.answerLast({ roomId: 'watched', epoch: 'W', offset: 20 });
  assert.deepEqual(await p, { roomId: 'watched', epoch: 'W', offset: 20 });
  assert.deepEqual(ctx.client.observedRooms, ['watched']);
  ctx.ws.receive(streamEvent('watched', 'W', 20));
  ctx.ws.receive(streamEvent('watched', 'W', 21));
  ctx.ws.receive(streamEvent('watched', 'W', 21));
  assert.deepEqual(seen.map((f) => f.offset), [21]);
  ctx.ws.serverClose(1001);
  let ws = await reconnect(ctx.WS, ctx.timers);
  assert.deepEqual(afterConnect(ws), [['room.observe', { roomId: 'watched' }]]);
  ws.answerLast({ roomId: 'watched', epoch: 'W', offset: 30 });
  ws.receive(streamEvent('watched', 'W', 31));
  assert.deepEqual(seen.map((f) => f.offset), [21, 31]);
  const un = ctx.client.unobserve('watched');
  ws.answerLast({});
  await un;
  assert.deepEqual(ctx.client.observedRooms, []);
  assert.equal(ctx.client.position('watched'), undefined);
  ws.serverClose(1001);
  ws = await reconnect(ctx.WS, ctx.timers);
  assert.deepEqual(afterConnect(ws), []);
});

test('a refused re-observe is reported and the room forgotten', async () => {
  const ctx = await connectedClient();
  const p = ctx.client.observe('w');
  ctx.ws.answerLast({ roomId: 'w', epoch: 'W' });
  await p;
  ctx.ws.serverClose(1006);
  const ws = await reconnect(ctx.WS, ctx.timers);
  ws.receive({ id: ws.lastFrame.id, error: { code: 40301, message: 'room.observe needs a token issued with observer: true', field: 'token' } });
  assert.deepEqual(ctx.errors.map((e) => [e.type, e.roomId, e.error.code]), [['reobserve', 'w', 40301]]);
  assert.deepEqual(ctx.client.observedRooms, []);
});

test('events of rooms the client does not track are emitted as they come', async () => {
  const ctx = await connectedClient();
  const seen = record(ctx.client, 'room.message');
  ctx.ws.receive(streamEvent('elsewhere', 'E', 5));
  ctx.ws.receive(streamEvent('elsewhere', 'E', 5));
  assert.equal(seen.length, 2);
  assert.equal(ctx.client.position('elsewhere'), undefined);
});

test('close() forgets the rooms: a later connect() joins nothing again', async () => {
  const ctx = await connectedClient();
  await joinAt(ctx, 'r1', 'E', 1);
  ctx.client.close();
  assert.deepEqual(ctx.client.rooms, []);
  const again = ctx.client.connect();
  await flush();
  ctx.WS.last.open();
  ctx.WS.last.answerLast(CONNECTED);
  await again;
  assert.deepEqual(afterConnect(ctx.WS.last), []);
});
