// Room QoS under overload (SPEC §14) as the client library sees it: room.send's new options and
// the room.gap event (QS-1, QS-3, QS-5).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EVENT_NAMES } from '../roomcast.js';
import { connectedClient, record, joinReply, streamEvent } from './fakes.mjs';

test('sendMessage passes priority, messageType and transient on to room.send (QS-1, QS-5)', async () => {
  const { client, ws } = await connectedClient();
  const p = client.sendMessage('r1', 'hi', { priority: 'high', messageType: 'RC:TxtMsg', transient: false, type: 'custom', ignored: 1 });
  assert.deepEqual(ws.lastFrame.args, { roomId: 'r1', content: 'hi', type: 'custom', priority: 'high', messageType: 'RC:TxtMsg', transient: false });
  ws.answerLast({ message: { messageId: 'm1', priority: 'high' } });
  assert.deepEqual(await p, { message: { messageId: 'm1', priority: 'high' } });
  // The old form (a type) and no options at all still work.
  client.sendMessage('r1', 'x', 'text');
  assert.deepEqual(ws.lastFrame.args, { roomId: 'r1', content: 'x', type: 'text' });
  client.sendMessage('r1', 'y');
  assert.deepEqual(ws.lastFrame.args, { roomId: 'r1', content: 'y' });
});

test('a refusal of the room budget rejects with its code and field (QS-2)', async () => {
  const { client, ws } = await connectedClient();
  const p = client.sendMessage('r1', 'like', { priority: 'low' });
  ws.receive({ id: ws.lastFrame.id, error: { code: 42902, message: 'room r1 is over its message budget', field: 'roomId' } });
  await assert.rejects(p, (err) => err.code === 42902 && err.field === 'roomId');
});

test('room.gap is emitted with its counts, in stream order, and does not move the position (QS-3)', async () => {
  const ctx = await connectedClient();
  assert.ok(EVENT_NAMES.includes('room.gap'));
  const seen = record(ctx.client, 'room.message', 'room.gap');
  const p = ctx.client.join('r1');
  ctx.ws.answerLast(joinReply('r1', 'E1', 10));
  await p;
  ctx.ws.receive(streamEvent('r1', 'E1', 11));
  const gap = { ev: 'room.gap', roomId: 'r1', epoch: 'E1', data: { fromOffset: 12, toOffset: 14, dropped: { normal: 2, low: 1, transient: 0 } } };
  ctx.ws.receive(gap);
  ctx.ws.receive(streamEvent('r1', 'E1', 15));
  assert.deepEqual(seen.map((f) => f.ev === 'room.gap' ? `gap ${f.data.fromOffset}-${f.data.toOffset}` : String(f.offset)), ['11', 'gap 12-14', '15']);
  assert.deepEqual(seen[1], gap);
  // Delivered plus counted in gaps: 2 messages got, 3 lost.
  const lost = seen.filter((f) => f.ev === 'room.gap').reduce((n, f) => n + f.data.dropped.normal + f.data.dropped.low + f.data.dropped.transient, 0);
  assert.equal(seen.filter((f) => f.ev === 'room.message').length + lost, 5);
  assert.deepEqual(ctx.client.position('r1'), { epoch: 'E1', offset: 15, stream: 'stream-A' });
});
