// TR-5: the compact encoding: what the client offers, and compact events handed to the
// application as the same objects the JSON encoding gives.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ENCODINGS } from '../roomcast.js';
import { connectedClient, record, joinReply, flush } from './fakes.mjs';

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
