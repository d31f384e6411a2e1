// Token refresh on token.expired, and the conversation cursor kept for the next connect.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connectedClient, reconnect, record, flush } from './fakes.mjs';

const expired = { ev: 'token.expired', data: { graceSeconds: 60 } };

test('token.expired: getToken is called, token.refresh is sent, the event is emitted, later reconnects keep working', async () => {
  let calls = 0;
  const ctx = await connectedClient({ getToken: async () => `fresh-${++calls}` });
  const seen = record(ctx.client, 'token.expired');
  ctx.ws.receive(expired);
  assert.deepEqual(seen, [expired]);
  await flush();
  assert.equal(calls, 1);
  assert.deepEqual(ctx.ws.lastFrame, { id: 2, op: 'token.refresh', args: { token: 'fresh-1' } });
  ctx.ws.answerLast({});
  await flush();
  assert.deepEqual(ctx.errors, []);
});

test('one refresh at a time: a second token.expired while refreshing sends nothing more', async () => {
  let calls = 0;
  const ctx = await connectedClient({ getToken: async () => `fresh-${++calls}` });
  ctx.ws.receive(expired);
  ctx.ws.receive(expired);
  await flush();
  assert.equal(calls, 1);
  assert.deepEqual(ctx.ws.frames.slice(1).map((f) => f.op), ['token.refresh']);
});

test('a refused token.refresh is reported as an error event', async () => {
  const ctx = await connectedClient({ getToken: async () => 'for-someone-else' });
  ctx.ws.receive(expired);
  await flush();
  ctx.ws.receive({ id: ctx.ws.lastFrame.id, error: { code: 40105, message: 'the new token is for another user or app', field: 'token' } });
  await flush();
  assert.deepEqual(ctx.errors.map((e) => [e.type, e.error.code, e.error.field]), [['tokenRefresh', 40105, 'token']]);
});

test('a failing getToken on token.expired is reported as an error event and sends nothing', async () => {
  const ctx = await connectedClient({ getToken: async () => { throw new Error('auth down'); } });
  ctx.ws.receive(expired);
  await flush();
  assert.equal(ctx.errors.length, 1);
  assert.equal(ctx.errors[0].type, 'tokenRefresh');
  assert.equal(ctx.errors[0].error.code, 'token');
  assert.equal(ctx.ws.frames.length, 1);
});

test('without getToken, token.expired is only emitted (the app refreshes with refreshToken)', async () => {
  const ctx = await connectedClient();
  const seen = record(ctx.client, 'token.expired');
  ctx.ws.receive(expired);
  await flush();
  assert.equal(seen.length, 1);
  assert.equal(ctx.ws.frames.length, 1);
});

test('conversation.statusSynced (code 0) updates the cursor sent with the next connect', async () => {
  const ctx = await connectedClient({ conversationCursor: 3 });
  assert.deepEqual(ctx.ws.frames[0].args, { token: 'tok-1', conversationCursor: 3 });
  ctx.ws.receive({ ev: 'conversation.statusSynced', data: { code: 0, cursor: 42 } });
  ctx.ws.receive({ ev: 'conversation.statusSynced', data: { code: 50301, cursor: 0 } }); // a failed sync keeps it
  assert.equal(ctx.client.conversationCursor, 42);
  ctx.ws.serverClose(1006);
  const ws2 = await reconnect(ctx.WS, ctx.timers);
  assert.deepEqual(ws2.frames[0].args, { token: 'tok-1', conversationCursor: 42 });
});
