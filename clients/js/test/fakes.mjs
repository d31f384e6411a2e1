// Test doubles for roomcast.js: a fake WebSocket class, fake timers, and a connected-client setup.
// (Node's test runner also loads this file as a test file; it defines no tests.)

import assert from 'node:assert/strict';
import { RoomcastClient } from '../roomcast.js';

/** Lets pending promise callbacks and microtasks run. */
export const flush = () => new Promise((resolve) => setImmediate(resolve));

/**
 * A fresh fake WebSocket class with its own list of instances. The test plays the server:
 * `open()`, `receive(frame)`, `serverClose(code)`; `frames` are the parsed messages the client sent.
 */
export function makeSocketClass() {
  class FakeSocket {
    static instances = [];
    static get last() { return FakeSocket.instances[FakeSocket.instances.length - 1]; }

    /** TR-5: the subprotocol `open()` reports as the server's choice ('' : none echoed). */
    static answerProtocol = '';

    constructor(url, protocols) {
      this.url = url;
      this.protocols = protocols;
      this.protocol = '';
      this.readyState = 0;
      this.sent = [];
      this.closeCalls = [];
      this.onopen = this.onmessage = this.onclose = this.onerror = null;
      FakeSocket.instances.push(this);
    }

    send(text) {
      if (this.readyState !== 1) throw new Error('InvalidStateError: not open');
      assert.equal(typeof text, 'string');
      this.sent.push(text);
    }

    /** The client's close: the close event follows asynchronously, as in browsers. */
    close(code, reason) {
      this.closeCalls.push({ code, reason });
      if (this.readyState >= 2) return;
      this.readyState = 2;
      queueMicrotask(() => {
        this.readyState = 3;
        this.onclose?.({ code: code ?? 1005, reason: reason ?? '' });
      });
    }

    get frames() { return this.sent.map((s) => JSON.parse(s)); }
    get lastFrame() { return this.frames[this.frames.length - 1]; }

    open() {
      this.protocol = FakeSocket.answerProtocol;
      this.readyState = 1;
      this.onopen?.({});
    }

    receive(frame) {
      this.onmessage?.({ data: typeof frame === 'string' ? frame : JSON.stringify(frame) });
    }

    /** Answers the last command sent with `ok`. */
    answerLast(ok) { this.receive({ id: this.lastFrame.id, ok }); }

    serverClose(code, reason = '') {
      this.readyState = 3;
      this.onclose?.({ code, reason });
    }
  }
  return FakeSocket;
}

/** Deterministic timers: nothing runs until `advance(ms)`. `log` lists every delay asked for. */
export function fakeTimers() {
  let now = 1_000_000;
  let seq = 0;
  const timers = new Map();
  const log = [];
  return {
    log,
    setTimeout(fn, ms) {
      const id = ++seq;
      timers.set(id, { fn, at: now + ms, ms });
      log.push(ms);
      return id;
    },
    clearTimeout(id) { timers.delete(id); },
    now: () => now,
    /** Delays of the timers still pending. */
    pending() { return [...timers.values()].map((t) => t.ms); },
    /** Moves the clock, running every timer that falls due, in order. */
    advance(ms) {
      const target = now + ms;
      for (;;) {
        let next = null;
        for (const [id, t] of timers) if (t.at <= target && (next === null || t.at < next[1].at)) next = [id, t];
        if (next === null) break;
        timers.delete(next[0]);
        now = next[1].at;
        next[1].fn();
      }
      now = target;
    },
  };
}

export const CONNECTED = { sessionId: 's1', userId: 'u1', anonymous: false, stream: 'stream-A', expiresAt: 2_000_000_000_000 };

/**
 * A client with fake socket and timers (random 0 unless given), connected: the connect frame was
 * answered with `connected`. Returns everything a test needs, with the state and error events
 * recorded.
 */
export async function connectedClient(options = {}, connected = CONNECTED, server = {}) {
  const WS = makeSocketClass();
  WS.answerProtocol = server.protocol ?? '';
  const timers = fakeTimers();
  const client = new RoomcastClient('ws://gateway.test/ws', {
    token: 'tok-1',
    // These tests are about the WebSocket itself; the fallback (TR-3) has its own (transport.test.mjs).
    transport: 'websocket',
    WebSocket: WS,
    setTimeout: timers.setTimeout,
    clearTimeout: timers.clearTimeout,
    now: timers.now,
    random: () => 0,
    ...options,
  });
  const states = [];
  const errors = [];
  client.on('state', (s) => states.push(s));
  client.on('error', (e) => errors.push(e));
  const connecting = client.connect();
  await flush();
  const ws = WS.last;
  ws.open();
  ws.answerLast(connected);
  assert.deepEqual(await connecting, connected);
  return { client, WS, ws, timers, states, errors };
}

/** Collects the frames emitted under the given event names. */
export function record(client, ...names) {
  const seen = [];
  for (const name of names) client.on(name, (frame) => seen.push(frame));
  return seen;
}

/** Answers a reconnect: waits for the socket, opens it, answers connect. Returns the socket. */
export async function reconnect(WS, timers, connected = CONNECTED) {
  const before = WS.instances.length;
  timers.advance(60_000);
  await flush();
  assert.equal(WS.instances.length, before + 1, 'a new socket was made');
  const ws = WS.last;
  ws.open();
  assert.equal(ws.frames[0].op, 'connect');
  ws.answerLast(connected);
  return ws;
}

/** A join answer for a room at a stream position. */
export const joinReply = (roomId, epoch, offset) => ({
  joinInfo: { memberCount: 1, joinTime: 1, offset, room: { roomId, name: roomId, onlineUserCount: 1, open: true, epoch } },
});

/** A room-stream event frame. */
export const streamEvent = (roomId, epoch, offset, ev = 'room.message', data = { message: { content: `m${offset}` } }) => ({ ev, roomId, epoch, offset, data });

/** Lets several rounds of promise callbacks run (fetch bodies and stream reads take a few). */
export async function settle(rounds = 5) {
  for (let i = 0; i < rounds; i++) await flush();
}

/**
 * TR-3: a fake fetch. The test plays the server for each request in `fetch.calls`: `json(status,
 * body)`, `stream()` (a text/event-stream answer: `push(text)`, `end()`), `fail()` (a network
 * error). A request's `path` is its URL's path, `query` its parameters, `headers` what was sent.
 * An aborted request rejects, and so does its stream's next read.
 */
export function makeFetch() {
  const calls = [];
  const fetch = (url, init = {}) => new Promise((resolve, reject) => {
    const u = new URL(url);
    const call = {
      url: String(url), path: u.pathname, query: Object.fromEntries(u.searchParams), method: init.method ?? 'GET',
      headers: init.headers ?? {}, body: init.body === undefined ? undefined : JSON.parse(init.body), aborted: false, answered: false,
      json(status, body) {
        call.answered = true;
        resolve({ status, headers: new Map([['content-type', 'application/json']]), text: async () => (typeof body === 'string' ? body : JSON.stringify(body)) });
      },
      stream(status = 200, type = 'text/event-stream') {
        call.answered = true;
        const encoder = new TextEncoder();
        let controller;
        const body = new ReadableStream({ start(c) { controller = c; } });
        call.controller = controller;
        resolve({ status, headers: new Map([['content-type', type]]), body, text: async () => '' });
        return {
          push(text) { if (!call.aborted) controller.enqueue(encoder.encode(text)); },
          end() { if (!call.aborted) controller.close(); },
        };
      },
      fail() { call.answered = true; reject(new TypeError('fetch failed')); },
    };
    init.signal?.addEventListener('abort', () => {
      call.aborted = true;
      const error = new DOMException('aborted', 'AbortError');
      if (call.controller) { try { call.controller.error(error); } catch { /* closed */ } }
      reject(error);
    });
    calls.push(call);
  });
  fetch.calls = calls;
  /** The requests to `path` (e.g. "/sse", "/client/ops"). */
  fetch.to = (path) => calls.filter((c) => c.path === path);
  fetch.lastTo = (path) => fetch.to(path).at(-1);
  return fetch;
}

/** One Server-Sent Event as the gateway writes it. */
export const sse = (name, data, id = 'cur') => `event: ${name}\ndata: ${typeof data === 'string' ? data : JSON.stringify(data)}\nid: ${id}\n\n`;
