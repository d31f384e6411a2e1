// TR-5: the compact encoding: what the client offers, and compact events handed to the
// application as the same objects the JSON encoding gives.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ENCODINGS } from '../roomcast.js';
import { connectedClient, record, joinReply, flush, reconnect } from './fakes.mjs';

const COMPACT = { protocol: ENCODINGS.compact };

/** The JSON encoding's room.message for a plain message. */
const jsonMessage = (roomId, epoch, offset, message) => ({
  ev: 'room.message', roomId, epoch, offset,
  data: { message: { roomId, senderNickname: '', senderAvatar: '', roomExt: '', type: 'text', content: '', fromServer: false, ...message } },
});

test('TR-5: the client offers compact then JSON by default, and nothing when asked for JSON', async () => {
  const compact = await connectedClient();
  assert.deepEqual(compact.ws.protocols, ['roomcast.compact.v1', 'roomcast.json.v1']);
  const json = await connectedClient({ encoding: 'json' });
  assert.equal(json.ws.protocols, undefined);
});

test('TR-5: a compact room.message reaches handlers as the JSON event, epoch from the join answer; positions advance', async () => {
  const ctx = await connectedClient({}, undefined, COMPACT);
  const seen = record(ctx.client, 'room.message');
  const joining = ctx.client.join('r1');
  ctx.ws.answerLast(joinReply('r1', 'E1', 10));
  await joining;
  ctx.ws.receive('{"m":"r1","o":11,"i":"m1","s":"u2","c":"hi","t":5}');
  ctx.ws.receive('{"m":"r1","o":12,"i":"m2","s":"","n":"Sys","k":"custom","c":"{}","t":6,"f":1,"pr":"high","y":"gift","to":["u1"],"tt":{"tag":"vip"}}');
  ctx.ws.receive('{"m":"r1","i":"m3","s":"u2","c":"now","t":7,"tr":1}');
  ctx.ws.receive('{"m":"r1","o":13,"i":"m0","s":"u2","t":8,"rc":1}');
  assert.deepEqual(seen, [
    jsonMessage('r1', 'E1', 11, { messageId: 'm1', sender: 'u2', content: 'hi', time: 5 }),
    jsonMessage('r1', 'E1', 12, { messageId: 'm2', sender: '', senderNickname: 'Sys', type: 'custom', content: '{}', time: 6, fromServer: true,
                                  priority: 'high', messageType: 'gift', targets: ['u1'], targetTags: { tag: 'vip' } }),
    // A transient message: no epoch, no offset, as in JSON.
    { ev: 'room.message', roomId: 'r1', data: { message: { roomId: 'r1', senderNickname: '', senderAvatar: '', roomExt: '', type: 'text',
                                                           content: 'now', fromServer: false, messageId: 'm3', sender: 'u2', time: 7, transient: true } } },
    jsonMessage('r1', 'E1', 13, { messageId: 'm0', sender: 'u2', time: 8, recalled: true }),
  ]);
  assert.deepEqual(ctx.client.position('r1'), { epoch: 'E1', offset: 13, stream: 'stream-A' });
  // An event at or before the position is still dropped (BX-1).
  ctx.ws.receive('{"m":"r1","o":12,"i":"m2","s":"u2","c":"again","t":6}');
  assert.equal(seen.length, 4);
});

test('TR-5: other compact events keep their data; room.gap keeps its epoch (p); answers are read as they are', async () => {
  const ctx = await connectedClient({}, undefined, COMPACT);
  const seen = record(ctx.client, 'room.gap', 'room.attributes', 'conversation.statusChanged');
  const joining = ctx.client.join('r1');
  ctx.ws.answerLast(joinReply('r1', 'E1', 10));
  await joining;
  ctx.ws.receive({ e: 'room.attributes', r: 'r1', o: 11, d: { updated: [], removed: ['k'], operator: 'u2', time: 1 } });
  ctx.ws.receive({ e: 'room.gap', r: 'r1', p: 'E1', d: { dropped: { normal: 2 }, fromOffset: 12, toOffset: 13 } });
  ctx.ws.receive({ e: 'conversation.statusChanged', d: { infoList: [] } });
  assert.deepEqual(seen, [
    { ev: 'room.attributes', roomId: 'r1', epoch: 'E1', offset: 11, data: { updated: [], removed: ['k'], operator: 'u2', time: 1 } },
    { ev: 'room.gap', roomId: 'r1', epoch: 'E1', data: { dropped: { normal: 2 }, fromOffset: 12, toOffset: 13 } },
    { ev: 'conversation.statusChanged', data: { infoList: [] } },
  ]);
});

test('TR-5: compact events that come before the join answer wait for its epoch and reach handlers before the join resolves', async () => {
  const ctx = await connectedClient({}, undefined, COMPACT);
  const order = [];
  ctx.client.on('room.message', (e) => order.push(['message', e.epoch, e.offset]));
  const joining = ctx.client.join('r1').then(() => order.push(['joined']));
  ctx.ws.receive('{"m":"r1","o":11,"i":"m1","s":"u2","c":"early","t":5}');
  await flush();
  assert.deepEqual(order, []);
  ctx.ws.answerLast(joinReply('r1', 'E7', 10));
  await joining;
  assert.deepEqual(order, [['message', 'E7', 11], ['joined']]);
  assert.deepEqual(ctx.client.position('r1'), { epoch: 'E7', offset: 11, stream: 'stream-A' });
  // A room nobody joined is not held: its events pass (no epoch to add).
  const other = record(ctx.client, 'room.kicked');
  ctx.ws.receive({ e: 'room.kicked', r: 'r9', d: { reason: 2, ext: '', time: 1 } });
  assert.deepEqual(other, [{ ev: 'room.kicked', roomId: 'r9', data: { reason: 2, ext: '', time: 1 } }]);
});

test('TR-5: without the server echoing compact, frames are read as JSON', async () => {
  const ctx = await connectedClient();
  const seen = record(ctx.client, 'room.message');
  ctx.ws.receive({ ev: 'room.message', roomId: 'r1', data: { message: { content: 'x' } } });
  assert.equal(seen.length, 1);
  assert.equal(seen[0].data.message.content, 'x');
});

test('TR-4: a rewind\'s messages (before the join\'s position) reach handlers once, and the position is the answer\'s', async () => {
  const ctx = await connectedClient({}, undefined, COMPACT);
  const seen = [];
  ctx.client.on('room.message', (e) => seen.push([e.epoch, e.offset, e.data.message.content]));
  const joining = ctx.client.join('r1', { rewind: 2 });
  ctx.ws.receive('{"m":"r1","o":5,"i":"m5","s":"u2","c":"five","t":5}');
  ctx.ws.receive('{"m":"r1","o":6,"i":"m6","s":"u2","c":"six","t":6}');
  ctx.ws.answerLast(joinReply('r1', 'E7', 10));
  await joining;
  assert.deepEqual(seen, [['E7', 5, 'five'], ['E7', 6, 'six']]);
  assert.deepEqual(ctx.client.position('r1'), { epoch: 'E7', offset: 10, stream: 'stream-A' });
});

// TR-5: room aliases. A compact connection's join, switch and observe answers carry `alias`; the
// room's events after it carry the number in `m` or `r`.

test('TR-5: a room alias from the join answer is mapped back: handlers get the room id, as with the id on the wire', async () => {
  const ctx = await connectedClient({}, undefined, COMPACT);
  const seen = record(ctx.client, 'room.message', 'room.attributes');
  const joining = ctx.client.join('lat1000-100-roomcast-compact');
  // What came before the answer names the room by its id.
  ctx.ws.receive('{"m":"lat1000-100-roomcast-compact","o":11,"i":"m1","s":"u2","c":"early","t":5}');
  ctx.ws.answerLast({ ...joinReply('lat1000-100-roomcast-compact', 'E1', 10), alias: 7 });
  await joining;
  ctx.ws.receive('{"m":7,"o":12,"i":"m2","s":"u2","c":"aliased","t":6}');
  ctx.ws.receive({ e: 'room.attributes', r: 7, o: 13, d: { updated: [], removed: ['k'], operator: 'u2', time: 1 } });
  assert.deepEqual(seen, [
    jsonMessage('lat1000-100-roomcast-compact', 'E1', 11, { messageId: 'm1', sender: 'u2', content: 'early', time: 5 }),
    jsonMessage('lat1000-100-roomcast-compact', 'E1', 12, { messageId: 'm2', sender: 'u2', content: 'aliased', time: 6 }),
    { ev: 'room.attributes', roomId: 'lat1000-100-roomcast-compact', epoch: 'E1', offset: 13, data: { updated: [], removed: ['k'], operator: 'u2', time: 1 } },
  ]);
  assert.deepEqual(ctx.client.position('lat1000-100-roomcast-compact'), { epoch: 'E1', offset: 13, stream: 'stream-A' });
  assert.deepEqual(ctx.errors, []);
});

test('TR-5: two rooms\' aliases are kept apart; an alias no answer named is a protocol error and reaches no handler', async () => {
  const ctx = await connectedClient({}, undefined, COMPACT);
  const seen = record(ctx.client, 'room.message');
  const a = ctx.client.join('a');
  ctx.ws.answerLast({ ...joinReply('a', 'EA', 0), alias: 1 });
  await a;
  const b = ctx.client.observe('b');
  ctx.ws.answerLast({ roomId: 'b', epoch: 'EB', alias: 2 });
  await b;
  ctx.ws.receive('{"m":2,"o":1,"i":"b1","s":"u","c":"to-b","t":1}');
  ctx.ws.receive('{"m":1,"o":1,"i":"a1","s":"u","c":"to-a","t":1}');
  ctx.ws.receive('{"m":3,"o":1,"i":"x1","s":"u","c":"unknown","t":1}');
  ctx.ws.receive({ e: 'room.kicked', r: 4, d: { reason: 2, ext: '', time: 1 } });
  assert.deepEqual(seen.map((e) => [e.roomId, e.epoch, e.data.message.content]), [['b', 'EB', 'to-b'], ['a', 'EA', 'to-a']]);
  assert.equal(ctx.errors.length, 2);
  assert.match(ctx.errors[0].error.message, /alias 3/);
  assert.match(ctx.errors[1].error.message, /alias 4/);
});

test('TR-5: room.switch\'s answer names the new room\'s alias', async () => {
  const ctx = await connectedClient({}, undefined, COMPACT);
  const seen = record(ctx.client, 'room.message');
  const joining = ctx.client.join('from');
  ctx.ws.answerLast({ ...joinReply('from', 'EF', 0), alias: 1 });
  await joining;
  const switching = ctx.client.switchRoom('from', 'to');
  ctx.ws.answerLast({ ...joinReply('to', 'ET', 3), alias: 2 });
  await switching;
  ctx.ws.receive('{"m":2,"o":4,"i":"t1","s":"u","c":"there","t":1}');
  assert.deepEqual(seen.map((e) => [e.roomId, e.epoch, e.offset]), [['to', 'ET', 4]]);
});

test('TR-5: a reconnect (maybe to another node) forgets the old aliases and takes the new connection\'s', async () => {
  const ctx = await connectedClient({}, undefined, COMPACT);
  const seen = record(ctx.client, 'room.message');
  const joining = ctx.client.join('r1');
  ctx.ws.answerLast({ ...joinReply('r1', 'E1', 10), alias: 7 });
  await joining;
  ctx.ws.receive('{"m":7,"o":11,"i":"m1","s":"u2","c":"first","t":5}');
  ctx.ws.serverClose(1001);
  const ws2 = await reconnect(ctx.WS, ctx.timers);
  const rejoin = ws2.lastFrame;
  assert.deepEqual(rejoin.args, { roomId: 'r1', mode: 'join', resume: { epoch: 'E1', stream: 'stream-A', offset: 11 } });
  // The other node replays by room id, answers with its own number for the room, then uses it.
  ws2.receive('{"m":"r1","o":12,"i":"m2","s":"u2","c":"missed","t":6}');
  ws2.receive({ id: rejoin.id, ok: { ...joinReply('r1', 'E1', 12), alias: 3 } });
  ws2.receive('{"m":3,"o":13,"i":"m3","s":"u2","c":"live","t":7}');
  // The old number means nothing on this connection.
  ws2.receive('{"m":7,"o":14,"i":"m4","s":"u2","c":"stale","t":8}');
  assert.deepEqual(seen.map((e) => [e.roomId, e.offset, e.data.message.content]), [['r1', 11, 'first'], ['r1', 12, 'missed'], ['r1', 13, 'live']]);
  assert.equal(ctx.errors.filter((e) => /alias 7/.test(e.error.message)).length, 1);
});
