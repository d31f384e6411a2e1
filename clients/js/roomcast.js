// Roomcast browser client (BX-4). One ES module, no dependencies, no build step.
//
// Protocol: openapi/websocket.md. Every op is a promise (`send`), every event a handler (`on`),
// the client reconnects with backoff and jitter, re-joins the rooms it was in with gap-free
// resume (BX-1), refreshes its token through an app-supplied callback, and reports connection
// states mapped to the vendors' (NIM-5 numbers, RC-1 statuses).
//
// Runs in modern browsers and in Node 20+ (pass a WebSocket class with the `WebSocket` option).
//
// TR-3: where a WebSocket cannot get through (a proxy that refuses the upgrade or cuts the
// socket), the client falls back to Server-Sent Events and then to long-polling (openapi/sse.md),
// posting its commands to /client/ops, and tries the WebSocket again now and then to move back.
// Every switch re-joins each room with resume from the last position delivered to the app, so no
// event is lost or delivered twice. `client.transport` names the transport; `transport` events
// tell each change. Option `transport`: "auto" (the default), "websocket", "sse" or "poll".
//
//   import { RoomcastClient } from '/client/roomcast.js';
//   const client = new RoomcastClient('wss://chat.example.com/ws', { getToken: () => fetch('/token').then((r) => r.text()) });
//   client.on('room.message', (frame) => console.log(frame.roomId, frame.data.message));
//   client.on('state', (s) => console.log(s.state, s.nimState, s.rcStatus));
//   await client.connect();
//   await client.join('lobby', { mode: 'enter' });
//   await client.sendMessage('lobby', 'hello');
//   await client.sendMessage('lobby', '+1', { priority: 'low', transient: true });
//
// Under overload (SPEC §14) a connection that reads slower than its room loses low, transient and
// then normal messages (never high-priority ones or other events) and is told so in stream order:
//   client.on('room.gap', (frame) => console.log(frame.roomId, frame.data.fromOffset, frame.data.toOffset, frame.data.dropped));
// `dropped` counts the lost messages per class (normal, low, transient); messages received plus
// the counts of every room.gap are what the room sent. A gap has no offset of its own; if the
// client reconnects before the room's next event, its resume starts from the last event it got
// and may replay lost events that are still in the room's resume window.

/** Connection states, with their NIM-5 numbers. */
export const NimState = Object.freeze({ entering: 0, entered: 1, enterFailed: 2, connectionLost: 3 });

/**
 * Close codes the server sends (websocket.md, "Close codes"), and 1006, which the browser reports
 * when the connection ends without a close frame. Tests/GatewayTests/ClientTableTests.swift keeps
 * this list, NO_RECONNECT_CLOSE_CODES and EVENT_NAMES equal to the server's tables.
 */
export const CloseCode = Object.freeze({
  normal: 1000,
  goingAway: 1001,
  protocolError: 1002,
  unsupportedData: 1003,
  abnormal: 1006,
  invalidPayload: 1007,
  messageTooBig: 1009,
  tryAgainLater: 1013,
  badMessage: 4000,
  notAuthenticated: 4001,
  tokenExpired: 4002,
  originNotAllowed: 4003,
  badToken: 4004,
  tooSlow: 4008,
  disconnectedByApp: 4010,
  disconnectedByAppReconnect: 4011,
  rateLimited: 4029,
});

/**
 * Close codes after which the client does not connect again: the Reconnect column of
 * websocket.md says "no" (the same attempt would fail again). 1000 is in the list because the
 * server only sends it to echo a close the client started; a 1000 the client did not start
 * (from a proxy, say) is retried like any other loss.
 */
export const NO_RECONNECT_CLOSE_CODES = Object.freeze([1000, 1002, 1003, 1007, 1009, 4000, 4003, 4004, 4010]);

/** Default reconnect backoff (see {@link backoffDelay}). */
export const DEFAULT_BACKOFF = Object.freeze({ initialMs: 500, maxMs: 30000, factor: 2, jitter: 0.5 });

/** Default time an answer may take before its promise rejects with code "timeout". */
export const DEFAULT_REQUEST_TIMEOUT_MS = 10000;

/**
 * TR-3: the transports, in fallback order: a WebSocket (`/ws`), Server-Sent Events (`GET /sse`)
 * and long-polling (`GET /poll`); the last two send their commands with `POST /client/ops`
 * (openapi/sse.md). Every one carries the same session, answers and events.
 */
export const TRANSPORTS = Object.freeze(['websocket', 'sse', 'poll']);

/**
 * TR-3: defaults of the `fallback` option. handshakeTimeoutMs: how long an attempt may take to
 * reach its session (a WebSocket's upgrade and connect answer, a stream's `hello`) before it
 * counts as failed; failuresBeforeFallback: attempts in a row that reach the server but no
 * session (cut, garbled, timed out; or a session cut within handshakeTimeoutMs before it
 * delivered any event) before the next transport is tried (a WebSocket upgrade that
 * fails, or a server that cannot be reached, moves on at once); probe: the backoff between tries
 * to go back to the WebSocket while on a fallback; heartbeatTimeoutMs: silence after which a
 * stream counts as cut (the server's heartbeat is 15 s); pollWaitSeconds: a poll's wait;
 * maxQueuedOps: commands waiting to be posted at most; maxEventBytes: the largest stream event.
 */
export const DEFAULT_FALLBACK = Object.freeze({
  handshakeTimeoutMs: 10000,
  failuresBeforeFallback: 2,
  probe: Object.freeze({ initialMs: 5000, maxMs: 120000, factor: 2, jitter: 0.5 }),
  heartbeatTimeoutMs: 45000,
  pollWaitSeconds: 20,
  maxQueuedOps: 1000,
  maxEventBytes: 1 << 20,
});

/**
 * TR-3: the HTTP base of a WebSocket URL: `wss://host/ws` → `https://host` (the routes `/sse`,
 * `/poll` and `/client/ops` hang off it).
 * @param {string} url
 */
export function httpBaseOf(url) {
  const u = new URL(url, globalThis.location?.href);
  if (u.protocol === 'wss:') u.protocol = 'https:';
  else if (u.protocol === 'ws:') u.protocol = 'http:';
  u.pathname = u.pathname.replace(/\/ws\/?$/, '');
  u.search = '';
  u.hash = '';
  return u.href.replace(/\/+$/, '');
}

/** Every event name the protocol defines (the client emits any other `ev` by its name too). */
export const EVENT_NAMES = Object.freeze([
  'room.status', 'room.kicked', 'room.memberChanged', 'room.members', 'room.multiLoginSync', 'room.block', 'room.ban',
  'room.notification', 'room.message', 'message.recalled', 'room.gap', 'room.attributes', 'room.resume', 'room.tagsUpdated',
  'group.channelTypeChanged', 'group.channelDisbanded', 'group.channelUserKicked', 'group.message', 'message.updated', 'group.moderationChanged',
  'conversation.statusChanged', 'conversation.statusSynced', 'token.expired',
]);

/** TR-5: the WebSocket subprotocols of the two event encodings (openapi/websocket.md, Encodings). */
export const ENCODINGS = Object.freeze({ compact: 'roomcast.compact.v1', json: 'roomcast.json.v1' });

/** TR-5: a compact room.message's short keys and the message fields they stand for. */
const COMPACT_MESSAGE_KEYS = Object.freeze({
  i: 'messageId', s: 'sender', n: 'senderNickname', a: 'senderAvatar', x: 'roomExt', k: 'type', c: 'content', t: 'time',
  f: 'fromServer', pr: 'priority', y: 'messageType', tr: 'transient', rc: 'recalled', to: 'targets', tt: 'targetTags',
});
/** Message fields a compact frame leaves out when they have these values. */
const COMPACT_MESSAGE_DEFAULTS = Object.freeze({ senderNickname: '', senderAvatar: '', roomExt: '', type: 'text', content: '', fromServer: false });
const COMPACT_FLAGS = new Set(['fromServer', 'transient', 'recalled']);
/** Compact events of one room that may wait for the answer naming its epoch. */
const MAX_WAITING_EVENTS = 1000;
/** Ops whose answer names a room's epoch (the compact events of that room wait for it). */
const EPOCH_ANSWERS = new Set(['room.join', 'room.switch', 'room.observe']);

/** What sendMessage passes on to room.send besides the room and the content. */
const SEND_OPTIONS = Object.freeze(['type', 'priority', 'messageType', 'transient']);

/** Server error code of a token that has expired (errors.md 40106). */
const TOKEN_EXPIRED_ERROR = 40106;

/**
 * The reconnect delay before retry number `attempt` (0 for the first retry), with "equal
 * jitter": `base = min(maxMs, initialMs * factor ** attempt)`, then
 * `delay = base * (1 - jitter * random())`, i.e. uniformly between `base * (1 - jitter)` and
 * `base`. The delay therefore never exceeds maxMs, and with jitter 0.5 never drops below half
 * the base. Rounded to whole milliseconds.
 * @param {number} attempt
 * @param {{initialMs?: number, maxMs?: number, factor?: number, jitter?: number}} [backoff]
 * @param {() => number} [random] returns a number in [0, 1)
 * @returns {number}
 */
export function backoffDelay(attempt, backoff = DEFAULT_BACKOFF, random = Math.random) {
  const b = { ...DEFAULT_BACKOFF, ...backoff };
  const base = Math.min(b.maxMs, b.initialMs * Math.pow(b.factor, attempt));
  return Math.round(base * (1 - b.jitter * random()));
}

/**
 * A refusal or failure of a command. `code` is the server's numeric code (errors.md), or one of
 * the client's own strings: "timeout" (no answer within requestTimeoutMs), "disconnected" (not
 * connected, or the socket closed before the answer), "closed" (close() was called),
 * "protocol" (the server sent something unreadable), "token" (getToken failed).
 */
export class RoomcastError extends Error {
  /**
   * @param {number|string} code
   * @param {string} message
   * @param {{field?: string, closeCode?: number, cause?: unknown}} [more]
   */
  constructor(code, message, more = {}) {
    super(message, more.cause === undefined ? undefined : { cause: more.cause });
    this.name = 'RoomcastError';
    this.code = code;
    if (more.field !== undefined) this.field = more.field;
    if (more.closeCode !== undefined) this.closeCode = more.closeCode;
  }
}

/** Profile fields of a join that are sent again when the client re-joins after a reconnect. */
const REJOIN_PROFILE_FIELDS = ['nickname', 'avatar', 'ext'];

/** A stream line ends with CRLF, LF or CR (a CR at the end of what came so far may be a CRLF's half). */
const SSE_LINE_END = /\r\n|\n|\r(?=[^\n])/g;

/**
 * TR-3: one session over plain HTTP (openapi/sse.md), internal to the client: a Server-Sent
 * Events stream read with fetch (so the token travels in the Authorization header, never in a
 * URL) or a series of long polls, and the session's commands posted to /client/ops one at a time
 * (so they keep their order, as on a WebSocket). It opens no rooms itself: the client joins them
 * with resume from the positions it delivered, as after any reconnect.
 */
class HttpLink {
  /**
   * @param {'sse'|'poll'} kind
   * @param {object} c what the link needs from its client: base, fetch, setTimeout, clearTimeout,
   *   fallback (DEFAULT_FALLBACK's shape), requestTimeoutMs, compact (boolean), token() (the current token),
   *   hello(ok), frame(data) (an event: JSON text, or a poll's object), answer(frame),
   *   failed(id, error), pending(id), problem(error), ended({code, reason, reached, established, refusal})
   */
  constructor(kind, c) {
    this.kind = kind;
    this.c = c;
    /** The id ops and polls name the session by (the hello's `stream`). */
    this.stream = null;
    /** The hello came: the session is up. */
    this.established = false;
    /** An HTTP answer came back (the server, or something in between, is reachable). */
    this.reached = false;
    this.done = false;
    /** The server's refusal of the session, if it refused it. */
    this.refusal = null;
    this.aborter = new AbortController();
    /** Commands waiting to be posted, oldest first (at most fallback.maxQueuedOps). */
    this.queue = [];
    this.posting = false;
    /** Set when the client moves to a WebSocket: nothing more is posted. */
    this.paused = false;
    /** Resolves when the post under way (if any) is answered. */
    this.idle = Promise.resolve();
    this.timer = null;
    this.closing = null;
  }

  /** Stops posting; resolves once the command being posted (if any) has its answer. */
  pause() {
    this.paused = true;
    return this.idle;
  }

  /** Posts again (the move to the WebSocket did not happen). */
  resume() {
    if (!this.paused) return;
    this.paused = false;
    if (this.queue.length > 0) this.#pumping();
  }

  open(token) {
    const q = new URLSearchParams();
    if (this.c.compact) q.set('encoding', 'compact');
    if (this.kind === 'poll') q.set('wait', String(this.c.fallback.pollWaitSeconds));
    this.arm(this.c.fallback.handshakeTimeoutMs, 'no session within the handshake bound');
    const url = `${this.c.base}/${this.kind}?${q}`;
    const run = this.kind === 'sse' ? this.runStream(url, token) : this.runPolls(url, token);
    run.catch((err) => this.end(CloseCode.abnormal, String(err?.message ?? err)));
  }

  /** Ends the link without telling the client (it closed it, or moved on). */
  close() {
    if (this.done) return;
    this.finish();
  }

  finish() {
    this.done = true;
    this.queue = [];
    if (this.timer !== null) this.c.clearTimeout(this.timer);
    this.timer = null;
    try { this.aborter.abort(); } catch { /* already aborted */ }
  }

  end(code, reason) {
    if (this.done) return;
    this.finish();
    this.c.ended({ code, reason, reached: this.reached, established: this.established, refusal: this.refusal });
  }

  /** (Re)starts the bound within which the next bytes must come. */
  arm(ms, why) {
    if (this.timer !== null) this.c.clearTimeout(this.timer);
    this.timer = this.c.setTimeout(() => { this.timer = null; this.end(CloseCode.abnormal, why); }, ms);
  }

  headers(token) { return { Authorization: `Bearer ${token}` }; }

  /** A refusal in an answer that is not the one hoped for: `{code, message, field}` (errors.md), or null. */
  async refusalOf(res) {
    let body = null;
    try { body = JSON.parse(await res.text()); } catch { /* not JSON: something in between answered */ }
    if (body === null || typeof body !== 'object' || typeof body.code !== 'number') return null;
    return new RoomcastError(body.code, body.message ?? `refused (${res.status})`, { field: body.field });
  }

  /** `GET /sse`: reads the event stream until it ends. */
  async runStream(url, token) {
    const res = await this.c.fetch(url, { headers: { ...this.headers(token), Accept: 'text/event-stream' }, signal: this.aborter.signal, cache: 'no-store' });
    if (this.done) return;
    this.reached = true;
    const type = res.headers?.get?.('content-type') ?? '';
    if (res.status !== 200 || !type.startsWith('text/event-stream') || !res.body) {
      this.refusal = await this.refusalOf(res);
      this.end(CloseCode.abnormal, `GET /sse answered ${res.status}`);
      return;
    }
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    const max = this.c.fallback.maxEventBytes;
    const lineEnd = new RegExp(SSE_LINE_END.source, 'g'); // this stream's own (lastIndex is state)
    let buffer = '';
    let name = '';
    let data = null;
    for (;;) {
      const { value, done } = await reader.read();
      if (this.done) { reader.cancel().catch(() => {}); return; }
      if (done) break;
      if (this.established) this.arm(this.c.fallback.heartbeatTimeoutMs, 'the stream went silent');
      buffer += typeof value === 'string' ? value : decoder.decode(value, { stream: true });
      let from = 0;
      lineEnd.lastIndex = 0;
      for (let m; (m = lineEnd.exec(buffer)) !== null;) {
        const line = buffer.slice(from, m.index);
        from = m.index + m[0].length;
        if (line === '') {
          // A blank line dispatches the event (an event cut short before it is never seen).
          if (data !== null) this.event(name || 'message', data);
          if (this.done) { reader.cancel().catch(() => {}); return; }
          name = '';
          data = null;
          continue;
        }
        if (line[0] === ':') continue; // a comment: the heartbeat
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let v = colon < 0 ? '' : line.slice(colon + 1);
        if (v[0] === ' ') v = v.slice(1);
        if (field === 'event') name = v;
        else if (field === 'data') data = data === null ? v : `${data}\n${v}`;
        // `id` is the stream's cursor; the client resumes from its rooms' positions instead.
        if (data !== null && data.length > max) throw new Error('a stream event over maxEventBytes');
      }
      buffer = buffer.slice(from);
      if (buffer.length > max) throw new Error('a stream line over maxEventBytes');
    }
    this.end(this.closing?.code ?? CloseCode.abnormal, this.closing?.reason ?? 'the stream ended');
  }

  /** `GET /poll`: opens the session, then polls until it ends. */
  async runPolls(url, token) {
    const wait = this.c.fallback.pollWaitSeconds;
    let next = url;
    let bearer = token;
    for (;;) {
      const res = await this.c.fetch(next, { headers: this.headers(bearer), signal: this.aborter.signal, cache: 'no-store' });
      if (this.done) return;
      this.reached = true;
      let answer = null;
      if (res.status === 200) {
        try { answer = JSON.parse(await res.text()); } catch { /* garbled */ }
      } else {
        const refusal = await this.refusalOf(res);
        // 40412: the session is gone (ended, or no poll reached it in time): a loss, not a refusal.
        if (refusal && refusal.code !== 40412 && !this.established) this.refusal = refusal;
      }
      if (this.done) return;
      if (answer === null || typeof answer !== 'object' || !Array.isArray(answer.events) || typeof answer.cursor !== 'string') {
        this.end(CloseCode.abnormal, `GET /poll answered ${res.status}`);
        return;
      }
      if (typeof answer.stream === 'string') this.stream = answer.stream;
      for (const e of answer.events) {
        if (e && typeof e.event === 'string') this.event(e.event, e.data);
        if (this.done) return;
      }
      const q = new URLSearchParams({ stream: this.stream ?? '', cursor: answer.cursor, wait: String(wait) });
      if (this.established) this.arm((wait + 10) * 1000, 'a poll went unanswered');
      next = `${this.c.base}/poll?${q}`;
      bearer = this.c.token();
    }
  }

  /** One event of the session: the link's own (hello, join, close, error) or the protocol's. */
  event(name, data) {
    const parse = () => (typeof data === 'string' ? JSON.parse(data) : data);
    switch (name) {
      case 'hello': {
        let f;
        try { f = parse(); } catch { f = null; }
        if (!f || typeof f.stream !== 'string') { this.end(CloseCode.abnormal, 'an unreadable hello'); return; }
        this.stream = f.stream;
        this.established = true;
        if (this.kind === 'sse') this.arm(this.c.fallback.heartbeatTimeoutMs, 'the stream went silent');
        else if (this.timer !== null) { this.c.clearTimeout(this.timer); this.timer = null; }
        this.c.hello(f.ok ?? {});
        return;
      }
      case 'join':
        return; // the link names no rooms when it opens
      case 'close': {
        let f = null;
        try { f = parse(); } catch { /* keep the default */ }
        this.closing = { code: typeof f?.code === 'number' ? f.code : CloseCode.abnormal, reason: f?.reason ?? '' };
        this.end(this.closing.code, this.closing.reason);
        return;
      }
      case 'error': {
        // The connect's refusal (the close follows), or an answer the server could not match.
        let e = null;
        try { e = parse()?.error; } catch { /* unreadable */ }
        const error = new RoomcastError(e?.code ?? 'protocol', e?.message ?? 'an error event', { field: e?.field });
        if (!this.established) this.refusal = error;
        else this.c.problem(error);
        return;
      }
      default:
        this.c.frame(data);
    }
  }

  /** Queues a command to post; false when the queue is full. */
  submit(id, op, args, bearer) {
    if (this.done || this.queue.length >= this.c.fallback.maxQueuedOps) return false;
    this.queue.push({ id, op, args, bearer });
    if (!this.paused) this.#pumping();
    return true;
  }

  /** The commands not posted yet (the client sends them on the WebSocket it moves to). */
  takeQueued() {
    const q = this.queue;
    this.queue = [];
    return q;
  }

  #pumping() {
    this.pump().catch((error) => this.c.problem(error));
  }

  async pump() {
    if (this.posting) return;
    this.posting = true;
    let idle;
    this.idle = new Promise((resolve) => { idle = resolve; });
    try {
      while (this.queue.length > 0 && !this.done && !this.paused) {
        const item = this.queue.shift();
        if (this.c.pending(item.id)) await this.post(item);
      }
    } finally {
      this.posting = false;
      idle();
    }
  }

  /**
   * Posts one command; its answer goes to the client even if the link closed meanwhile (a move
   * to the WebSocket does not lose the answer of a command already sent).
   */
  async post({ id, op, args, bearer }) {
    // A post that hangs is given up a little after its command timed out (the next one goes).
    const aborter = new AbortController();
    const timer = this.c.setTimeout(() => aborter.abort(), this.c.requestTimeoutMs + 1000);
    let res;
    let body = null;
    try {
      res = await this.c.fetch(`${this.c.base}/client/ops`, {
        method: 'POST',
        headers: { ...this.headers(bearer ?? this.c.token()), 'Content-Type': 'application/json', 'X-Roomcast-Stream': this.stream ?? '' },
        body: JSON.stringify({ id, op, args }),
        cache: 'no-store',
        signal: aborter.signal,
      });
      try { body = JSON.parse(await res.text()); } catch { /* not JSON */ }
    } catch (err) {
      this.c.failed(id, new RoomcastError('disconnected', `${op} could not be sent: ${err?.message ?? err}`, { cause: err }));
      return;
    } finally {
      this.c.clearTimeout(timer);
    }
    if (res.status === 200 && body && typeof body === 'object' && body.id === id) {
      this.c.answer(body);
    } else if (body && typeof body === 'object' && typeof body.code === 'number' && body.code !== 40412) {
      this.c.failed(id, new RoomcastError(body.code, body.message ?? `refused (${res.status})`, { field: body.field }));
    } else {
      this.c.failed(id, new RoomcastError('disconnected', `the session ended before the answer to ${op} (${res.status})`));
    }
  }
}

/**
 * A Roomcast client: a WebSocket, or (TR-3) Server-Sent Events or long-polling when a WebSocket
 * cannot get through. See roomcast.d.ts for the documented API.
 */
export class RoomcastClient {
  // Configuration.
  #url;
  #options;
  #WebSocket;
  #random;
  #setTimeout;
  #clearTimeout;
  #now;
  #backoff;
  #timeoutMs;
  #fetch;
  /** TR-3: the transports to try, in order (`transport` "auto": all three). */
  #ladder;
  #fallback;
  #probeBackoff;
  #httpBase = null;

  // Credentials.
  #token;
  #conversationCursor;

  // Connection.
  /** @type {'connecting'|'connected'|'disconnected'} */
  #state = 'disconnected';
  #ws = null;
  /** True between the connect answer and the socket's close. */
  #connected = false;
  /** True after close(): no reconnect until connect() is called again. */
  #closed = false;
  /** Attempts made since connect() (the first one uses `token`, later ones call getToken). */
  #attempts = 0;
  /** Consecutive failed attempts, the backoff exponent; 0 after a successful connect. */
  #failures = 0;
  /** Bumped whenever an attempt is abandoned, so a late getToken result is ignored. */
  #generation = 0;
  #reconnectTimer = null;
  /** The server's error answer to the current connect, if it refused it. */
  #refusal = null;
  #session = null;
  /** @type {{resolve: Function, reject: Function}[]} */
  #connectWaiters = [];
  #refreshingToken = false;

  // TR-3: transports.
  /** The session over plain HTTP (SSE or long-polling), when not on a WebSocket. @type {HttpLink|null} */
  #http = null;
  /** Index in #ladder of the transport the next attempt uses. */
  #level = 0;
  /** Attempts in a row at this level that reached the server but no session. */
  #levelFailures = 0;
  #attemptKind = null;
  /** The current attempt's WebSocket opened (its upgrade went through). */
  #attemptOpened = false;
  /** The current attempt reached its session (connect answer, or hello). */
  #attemptEstablished = false;
  /** The current session delivered an event (anything besides answers). */
  #attemptDelivered = false;
  /** When the current session was established, and the failure counts it reset then. */
  #establishedAt = 0;
  #countsAtConnect = { failures: 0, levelFailures: 0 };
  #handshakeTimer = null;
  /** @type {'websocket'|'sse'|'poll'|null} */
  #transport = null;
  #probeTimer = null;
  #probeWs = null;
  #probeFailures = 0;

  // Commands.
  #nextId = 1;
  /** @type {Map<number, {op: string, args: object, done: (err: RoomcastError|null, ok?: any) => void, timer: any}>} */
  #pending = new Map();

  // Rooms (BX-1).
  /** Joined rooms: roomId → the profile fields to join again with. @type {Map<string, object>} */
  #joined = new Map();
  /** @type {Set<string>} */
  #observed = new Set();
  /** roomId → last position seen: {epoch, offset (null: unknown), stream}. */
  #positions = new Map();

  /** @type {Map<string, Set<Function>>} */
  #handlers = new Map();

  // TR-5: the compact encoding.
  /** The current socket speaks roomcast.compact.v1 (the server echoed it). */
  #compact = false;
  /** roomId → compact events that came before the answer naming the room's epoch. @type {Map<string, object[]>} */
  #waitingForEpoch = new Map();
  /**
   * Room aliases this connection's answers named (join, switch, observe): alias → roomId. A node
   * gives its own numbers, so the map starts empty with every connection.
   * @type {Map<number, string>}
   */
  #aliases = new Map();

  /**
   * @param {string} url the server's WebSocket URL, e.g. "wss://chat.example.com/ws"
   * @param {object} [options] see RoomcastClientOptions in roomcast.d.ts
   */
  constructor(url, options = {}) {
    this.#url = url;
    this.#options = options;
    this.#WebSocket = options.WebSocket ?? globalThis.WebSocket;
    this.#random = options.random ?? Math.random;
    const setT = options.setTimeout ?? globalThis.setTimeout;
    const clearT = options.clearTimeout ?? globalThis.clearTimeout;
    // Called without a receiver, so the browser's own timer functions work unbound.
    this.#setTimeout = (fn, ms) => setT(fn, ms);
    this.#clearTimeout = (t) => clearT(t);
    this.#now = options.now ?? Date.now;
    this.#backoff = { ...DEFAULT_BACKOFF, ...(options.backoff ?? {}) };
    this.#timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.#token = options.token;
    this.#conversationCursor = options.conversationCursor;
    const fetchFn = options.fetch ?? globalThis.fetch;
    this.#fetch = typeof fetchFn === 'function' ? (input, init) => fetchFn(input, init) : null;
    this.#fallback = { ...DEFAULT_FALLBACK, ...(options.fallback ?? {}) };
    this.#probeBackoff = { ...DEFAULT_FALLBACK.probe, ...(options.fallback?.probe ?? {}) };
    const transport = options.transport ?? 'auto';
    if (transport === 'auto') {
      // The HTTP transports need a token (no anonymous sessions) and fetch.
      this.#ladder = options.anonymous || !this.#fetch ? ['websocket'] : [...TRANSPORTS];
    } else if (TRANSPORTS.includes(transport)) {
      if (transport !== 'websocket' && options.anonymous) throw new TypeError(`anonymous clients need a WebSocket (transport ${transport})`);
      if (transport !== 'websocket' && !this.#fetch) throw new TypeError('no fetch: pass options.fetch');
      this.#ladder = [transport];
    } else {
      throw new TypeError(`transport is "auto", "websocket", "sse" or "poll", not ${transport}`);
    }
    if (options.httpUrl !== undefined) this.#httpBase = String(options.httpUrl).replace(/\/+$/, '');
    if (this.#ladder.includes('websocket') && typeof this.#WebSocket !== 'function') {
      if (transport === 'auto' && this.#fetch && !options.anonymous) this.#ladder = ['sse', 'poll'];
      else throw new TypeError('no WebSocket class: pass options.WebSocket');
    }
    if (!options.token && !options.getToken && !options.anonymous) {
      throw new TypeError('options need token, getToken or anonymous');
    }
  }

  // MARK: Public state

  /** @returns {'connecting'|'connected'|'disconnected'} */
  get state() { return this.#state; }

  /** The last connect answer, or null before the first. */
  get session() { return this.#session; }

  /** The rooms the client is in (and will re-join after a reconnect). */
  get rooms() { return [...this.#joined.keys()]; }

  /** The rooms the client observes (and will observe again after a reconnect). */
  get observedRooms() { return [...this.#observed]; }

  /**
   * TR-3: the transport of the current (or last) session: "websocket", "sse" or "poll"; null
   * before the first. A `transport` event tells each change.
   */
  get transport() { return this.#transport; }

  /** The cursor sent with the next connect (updated by conversation.statusSynced). */
  get conversationCursor() { return this.#conversationCursor; }

  /**
   * The last stream position seen in a room, or undefined for a room not tracked.
   * @param {string} roomId
   */
  position(roomId) {
    const p = this.#positions.get(roomId);
    return p ? { ...p } : undefined;
  }

  // MARK: Events

  /**
   * Adds a handler for an event name (any server `ev`, or "state", "error", "*" for every
   * server event). Returns a function that removes it.
   * @param {string} name
   * @param {Function} handler
   */
  on(name, handler) {
    let set = this.#handlers.get(name);
    if (!set) this.#handlers.set(name, (set = new Set()));
    set.add(handler);
    return () => this.off(name, handler);
  }

  /** Removes a handler added with on(). */
  off(name, handler) {
    this.#handlers.get(name)?.delete(handler);
  }

  #emit(name, payload) {
    const set = this.#handlers.get(name);
    if (!set) return;
    for (const handler of [...set]) {
      try {
        handler(payload);
      } catch (err) {
        // An app handler's exception must not break the client's bookkeeping.
        if (name === 'error') {
          globalThis.console?.error?.('roomcast: error handler threw', err);
        } else {
          this.#emit('error', { type: 'handler', event: name, error: err });
        }
      }
    }
  }

  // MARK: Connecting

  /**
   * Connects (or returns the pending connection). Resolves with the connect answer of the first
   * successful attempt; transient failures are retried with backoff while the promise waits.
   * Rejects when the client gives up: a refusal (connect error answer, or a close code that
   * must not be retried), autoReconnect false, or close().
   * @returns {Promise<object>}
   */
  connect() {
    if (this.#connected) return Promise.resolve(this.#session);
    const promise = new Promise((resolve, reject) => this.#connectWaiters.push({ resolve, reject }));
    if (this.#closed) {
      this.#closed = false;
      this.#attempts = 0;
      this.#failures = 0;
    }
    if (this.#state === 'disconnected' && this.#reconnectTimer === null) this.#attempt();
    return promise;
  }

  /**
   * Closes for good: no reconnect; pending commands reject with "disconnected", a pending
   * connect() with "closed"; the rooms are forgotten (a later connect() starts afresh).
   */
  close() {
    if (this.#closed) return;
    const wasActive = this.#ws !== null || this.#http !== null || this.#reconnectTimer !== null || this.#state !== 'disconnected';
    this.#closed = true;
    this.#generation++;
    if (this.#reconnectTimer !== null) {
      this.#clearTimeout(this.#reconnectTimer);
      this.#reconnectTimer = null;
    }
    this.#clearHandshake();
    this.#stopProbe();
    if (this.#http) this.#http.close();
    this.#http = null;
    this.#level = 0;
    this.#levelFailures = 0;
    const ws = this.#ws;
    if (ws) {
      this.#detach(ws);
      try { ws.close(1000, 'closed by client'); } catch { /* already closing */ }
    }
    this.#ws = null;
    this.#connected = false;
    this.#failPending();
    this.#joined.clear();
    this.#observed.clear();
    this.#positions.clear();
    this.#rejectWaiters(new RoomcastError('closed', 'the client was closed'));
    if (wasActive) {
      this.#setState('disconnected', { code: 1000, reason: 'closed by client', nimState: NimState.connectionLost, willReconnect: false });
    }
  }

  /** One connection attempt: credentials, socket, then the connect command once it opens. */
  async #attempt() {
    this.#reconnectTimer = null;
    const generation = ++this.#generation;
    const first = this.#attempts === 0;
    this.#attempts++;
    this.#refusal = null;
    this.#setState('connecting', {});
    let args;
    try {
      args = await this.#connectArgs(first);
    } catch (err) {
      if (generation !== this.#generation || this.#closed) return;
      const error = err instanceof RoomcastError ? err : new RoomcastError('token', `getToken failed: ${err?.message ?? err}`, { cause: err });
      this.#emit('error', { type: 'token', error });
      this.#lost(undefined, 'getToken failed', false, error);
      return;
    }
    if (generation !== this.#generation || this.#closed) return;
    const kind = this.#ladder[this.#level] ?? this.#ladder[0];
    this.#attemptKind = kind;
    this.#attemptOpened = false;
    this.#attemptEstablished = false;
    this.#attemptDelivered = false;
    if (kind !== 'websocket') {
      this.#openHttp(kind, args);
      return;
    }
    let ws;
    try {
      ws = this.#newSocket();
    } catch (err) {
      // A malformed URL or a blocked port: trying again would fail the same way.
      this.#lost(undefined, String(err?.message ?? err), true, new RoomcastError('disconnected', String(err?.message ?? err), { cause: err }));
      return;
    }
    this.#ws = ws;
    if (this.#ladder.length > 1) {
      // TR-3: an upgrade or connect that does not complete within the bound counts as failed.
      this.#handshakeTimer = this.#setTimeout(() => {
        this.#handshakeTimer = null;
        if (this.#ws === ws && !this.#connected) this.#abandon(ws, 'the WebSocket handshake timed out');
      }, this.#fallback.handshakeTimeoutMs);
    }
    ws.onopen = () => {
      if (this.#ws !== ws) return;
      this.#attemptOpened = true;
      this.#compact = ws.protocol === ENCODINGS.compact;
      this.#waitingForEpoch.clear();
      this.#aliases.clear();
      this.#write('connect', args, (err, ok) => {
        if (err === null) this.#connectedWith(ok);
        else if (err.code === 'timeout') this.#abandon(ws, 'connect timed out');
        else if (err.code !== 'disconnected') {
          // The server refused; it closes the socket (we close it too, in case it does not).
          this.#refusal = err;
          try { ws.close(1000); } catch { /* already closing */ }
        }
      });
    };
    ws.onmessage = (event) => { if (this.#ws === ws) this.#receive(event.data); };
    ws.onclose = (event) => { if (this.#ws === ws) this.#socketClosed(event.code, event.reason); };
    ws.onerror = () => { /* a close event follows */ };
  }

  /** A WebSocket to the server, offering the encodings (TR-5: compact unless the application asked for JSON). */
  #newSocket() {
    return this.#options.encoding === 'json' ? new this.#WebSocket(this.#url) : new this.#WebSocket(this.#url, [ENCODINGS.compact, ENCODINGS.json]);
  }

  /** TR-3: opens a session over plain HTTP (`sse` or `poll`) with the attempt's token. */
  #openHttp(kind, args) {
    if (this.#httpBase === null) this.#httpBase = httpBaseOf(this.#url);
    const link = new HttpLink(kind, {
      base: this.#httpBase,
      fetch: this.#fetch,
      setTimeout: this.#setTimeout,
      clearTimeout: this.#clearTimeout,
      fallback: this.#fallback,
      requestTimeoutMs: this.#timeoutMs,
      compact: this.#options.encoding !== 'json',
      token: () => this.#token,
      hello: (ok) => { if (this.#http === link) this.#connectedWith(ok); },
      frame: (data) => { if (this.#http === link) this.#receive(data); },
      // Answers are matched by id: one posted before a move to the WebSocket still counts.
      answer: (frame) => this.#answer(frame),
      failed: (id, error) => this.#failOne(id, error),
      pending: (id) => this.#pending.has(id),
      problem: (error) => this.#emit('error', { type: 'protocol', error }),
      ended: (info) => {
        if (this.#http !== link) return;
        if (info.refusal) this.#refusal = info.refusal;
        this.#socketClosed(info.code, info.reason, info.reached);
      },
    });
    this.#http = link;
    this.#compact = this.#options.encoding !== 'json';
    this.#waitingForEpoch.clear();
    this.#aliases.clear();
    link.open(args.token);
  }

  /** The connect args of the current token (no getToken call). */
  #sessionArgs() {
    const o = this.#options;
    const args = { token: this.#token };
    if (o.device !== undefined) args.device = o.device;
    if (this.#conversationCursor !== undefined) args.conversationCursor = this.#conversationCursor;
    return args;
  }

  /** The connect args: a token (from getToken except on the first attempt if one was given), or anonymous. */
  async #connectArgs(first) {
    const o = this.#options;
    if (o.anonymous) {
      const anonymous = {};
      if (o.anonymous.nickname !== undefined) anonymous.nickname = o.anonymous.nickname;
      if (o.anonymous.avatar !== undefined) anonymous.avatar = o.anonymous.avatar;
      const args = { appKey: o.anonymous.appKey, anonymous };
      if (o.device !== undefined) args.device = o.device;
      return args;
    }
    if (o.getToken && !(first && this.#token)) {
      const token = await o.getToken();
      if (typeof token !== 'string' || token === '') throw new RoomcastError('token', 'getToken returned no token');
      this.#token = token;
    }
    return this.#sessionArgs();
  }

  /** The connect answer: re-join and re-observe, then report the state and resolve connect(). */
  #connectedWith(ok) {
    this.#connected = true;
    this.#countsAtConnect = { failures: this.#failures, levelFailures: this.#levelFailures };
    this.#establishedAt = this.#now();
    this.#failures = 0;
    this.#attemptEstablished = true;
    this.#levelFailures = 0;
    this.#clearHandshake();
    this.#session = ok;
    if (this.#attemptKind === 'websocket') this.#probeFailures = 0;
    this.#setTransport(this.#attemptKind);
    for (const [roomId, profile] of this.#joined) this.#rejoin(roomId, profile);
    for (const roomId of this.#observed) this.#reobserve(roomId);
    this.#setState('connected', {});
    const waiters = this.#connectWaiters;
    this.#connectWaiters = [];
    for (const w of waiters) w.resolve(ok);
    // TR-3: on a fallback, try the WebSocket again now and then.
    if (this.#connected && this.#http !== null) this.#scheduleProbe();
  }

  #setTransport(kind) {
    if (kind === this.#transport) return;
    const previous = this.#transport;
    this.#transport = kind;
    this.#emit('transport', { transport: kind, previous, at: this.#now() });
  }

  #clearHandshake() {
    if (this.#handshakeTimer === null) return;
    this.#clearTimeout(this.#handshakeTimer);
    this.#handshakeTimer = null;
  }

  // MARK: TR-3: falling back, and going back to the WebSocket

  /**
   * After an attempt that ended before its session: whether to move to the next transport now.
   * `reached`: the server answered (a WebSocket opened, an HTTP answer came). Not reached, or
   * failuresBeforeFallback times in a row: the next transport, at once. Past the last one, the
   * next round starts again from the first after the backoff.
   */
  #stepDown(reached) {
    if (this.#ladder.length < 2) return false;
    this.#levelFailures++;
    if (reached && this.#levelFailures < this.#fallback.failuresBeforeFallback) return false;
    this.#levelFailures = 0;
    if (this.#level + 1 < this.#ladder.length) {
      this.#level++;
      return true;
    }
    this.#level = 0;
    return false;
  }

  #scheduleProbe() {
    if (this.#probeTimer !== null || this.#probeWs !== null || this.#closed || this.#ladder[0] !== 'websocket') return;
    const delayMs = backoffDelay(this.#probeFailures, this.#probeBackoff, this.#random);
    this.#probeTimer = this.#setTimeout(() => {
      this.#probeTimer = null;
      this.#probe();
    }, delayMs);
  }

  #stopProbe() {
    if (this.#probeTimer !== null) this.#clearTimeout(this.#probeTimer);
    this.#probeTimer = null;
    const ws = this.#probeWs;
    this.#probeWs = null;
    if (ws) {
      this.#detach(ws);
      try { ws.close(1000); } catch { /* already closing */ }
    }
  }

  /**
   * Tries the WebSocket while a session runs over HTTP: once its connect is answered, the client
   * moves to it (#cutover); otherwise it tries again after the probe backoff.
   */
  #probe() {
    const link = this.#http;
    if (!this.#connected || link === null || this.#closed) return;
    let ws;
    try {
      ws = this.#newSocket();
    } catch {
      this.#probeFailed();
      return;
    }
    this.#probeWs = ws;
    const id = this.#nextId++;
    /** Frames before the connect answer (handled after the move); a handful at most. */
    const early = [];
    const timer = this.#setTimeout(() => { if (this.#probeWs === ws) this.#probeFailed(); }, this.#fallback.handshakeTimeoutMs);
    const fail = () => {
      if (this.#probeWs !== ws) return;
      this.#clearTimeout(timer);
      this.#probeFailed();
    };
    ws.onopen = () => {
      if (this.#probeWs !== ws) return;
      try { ws.send(JSON.stringify({ id, op: 'connect', args: this.#sessionArgs() })); } catch { fail(); }
    };
    ws.onmessage = (event) => {
      if (this.#probeWs !== ws) return;
      let frame = null;
      try { frame = JSON.parse(event.data); } catch { /* an event; kept below */ }
      if (frame !== null && typeof frame === 'object' && frame.id === id) {
        if (frame.error || !frame.ok) {
          fail();
          return;
        }
        this.#clearTimeout(timer);
        // Commands already posted are answered first, then the rest move with the client.
        link.pause().then(() => {
          if (this.#probeWs === ws && this.#http === link && this.#connected) this.#cutover(ws, frame.ok, early);
        });
      } else if (early.length < 64) {
        early.push(event.data);
      } else {
        fail();
      }
    };
    ws.onclose = fail;
    ws.onerror = () => { /* a close event follows */ };
  }

  #probeFailed() {
    const ws = this.#probeWs;
    this.#probeWs = null;
    if (ws) {
      this.#detach(ws);
      try { ws.close(1000); } catch { /* already closing */ }
    }
    this.#probeFailures++;
    this.#http?.resume();
    if (this.#connected && this.#http !== null) this.#scheduleProbe();
  }

  /**
   * Moves a session from HTTP to the WebSocket whose connect was just answered: the HTTP session
   * is closed (its later events are not delivered), every room is joined again with resume from
   * the last position delivered to the app, and the commands not posted yet go on the socket.
   * The state stays "connected"; a `transport` event tells the move.
   */
  #cutover(ws, ok, early) {
    const link = this.#http;
    const queued = link.takeQueued();
    link.close();
    this.#http = null;
    this.#probeWs = null;
    this.#probeFailures = 0;
    this.#level = 0;
    this.#levelFailures = 0;
    this.#ws = ws;
    this.#attemptKind = 'websocket';
    this.#attemptOpened = true;
    this.#attemptEstablished = true;
    this.#attemptDelivered = true; // the session has been delivering over HTTP
    this.#compact = ws.protocol === ENCODINGS.compact;
    this.#waitingForEpoch.clear();
    this.#aliases.clear();
    ws.onmessage = (event) => { if (this.#ws === ws) this.#receive(event.data); };
    ws.onclose = (event) => { if (this.#ws === ws) this.#socketClosed(event.code, event.reason); };
    ws.onerror = () => { /* a close event follows */ };
    this.#session = ok;
    this.#setTransport('websocket');
    for (const data of early) this.#receive(data);
    for (const [roomId, profile] of this.#joined) this.#rejoin(roomId, profile);
    for (const roomId of this.#observed) this.#reobserve(roomId);
    for (const item of queued) {
      if (!this.#pending.has(item.id)) continue;
      try {
        ws.send(JSON.stringify({ id: item.id, op: item.op, args: item.args }));
      } catch (err) {
        this.#failOne(item.id, new RoomcastError('disconnected', `${item.op} could not be sent: ${err?.message ?? err}`, { cause: err }));
      }
    }
  }

  /** Drops a socket we gave up on (connect timed out) as if it had closed abnormally. */
  #abandon(ws, reason) {
    this.#detach(ws);
    try { ws.close(1000); } catch { /* already closing */ }
    this.#socketClosed(CloseCode.abnormal, reason);
  }

  #detach(ws) {
    ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
  }

  /**
   * The socket or HTTP session closed (not by close()): decide whether, how and when to connect
   * again. `reached`: the attempt got through to the server (TR-3).
   */
  #socketClosed(code, reason, reached = this.#attemptOpened) {
    if (this.#ws) this.#detach(this.#ws);
    this.#ws = null;
    if (this.#http) this.#http.close();
    this.#http = null;
    this.#clearHandshake();
    this.#stopProbe();
    let established = this.#attemptEstablished;
    this.#attemptEstablished = false;
    if (established && this.#ladder.length > 1 && !this.#attemptDelivered && this.#now() - this.#establishedAt < this.#fallback.handshakeTimeoutMs) {
      // TR-3: cut right after its session began, before delivering anything: as good as not
      // established (it counts towards the fallback, and the backoff keeps growing).
      established = false;
      this.#failures = this.#countsAtConnect.failures;
      this.#levelFailures = this.#countsAtConnect.levelFailures;
    }
    this.#connected = false;
    this.#failPending();
    const refusal = this.#refusal;
    this.#refusal = null;
    if (refusal) {
      // A refused connect is final, except for an expired token we can replace and the
      // server's "try again" codes (5xxxx: store unavailable, starting or shutting down).
      const transient = typeof refusal.code === 'number' && ((refusal.code >= 50000 && refusal.code < 60000) || Math.floor(refusal.code / 100) === 429);
      const retry = transient || (refusal.code === TOKEN_EXPIRED_ERROR && Boolean(this.#options.getToken));
      refusal.closeCode = code;
      this.#lost(code, reason, !retry, refusal);
      return;
    }
    // 1000 is never refused here: the server only echoes a close we started (and close()
    // detaches first), so a 1000 we did not ask for comes from something in between (a proxy).
    const refused = code !== CloseCode.normal && NO_RECONNECT_CLOSE_CODES.includes(code);
    // TR-3: an attempt that never reached its session may move to the next transport at once.
    const now = !refused && !established && this.#stepDown(reached);
    this.#lost(code, reason, refused, refused ? new RoomcastError('disconnected', `closed by the server (${code}${reason ? ': ' + reason : ''})`, { closeCode: code }) : undefined, now);
  }

  /**
   * The connection is gone: report "disconnected", then schedule the next attempt or give up.
   * @param {number|undefined} code close code
   * @param {string|undefined} reason
   * @param {boolean} refused the server refused us; never retried
   * @param {RoomcastError} [error]
   * @param {boolean} [now] TR-3: the next transport is tried at once (no backoff)
   */
  #lost(code, reason, refused, error, now = false) {
    const willReconnect = !refused && this.#options.autoReconnect !== false && !this.#closed;
    const extra = { code, reason, nimState: refused ? NimState.enterFailed : NimState.connectionLost, willReconnect };
    if (error) extra.error = error;
    if (willReconnect) {
      const delayMs = now ? 0 : backoffDelay(this.#failures, this.#backoff, this.#random);
      if (!now) this.#failures++;
      extra.delayMs = delayMs;
      this.#reconnectTimer = this.#setTimeout(() => this.#attempt(), delayMs);
      this.#setState('disconnected', extra);
    } else {
      this.#setState('disconnected', extra);
      this.#rejectWaiters(error ?? new RoomcastError('disconnected', `the connection closed (${code ?? 'no code'})`, code === undefined ? {} : { closeCode: code }));
    }
  }

  #rejectWaiters(error) {
    const waiters = this.#connectWaiters;
    this.#connectWaiters = [];
    for (const w of waiters) w.reject(error);
  }

  /**
   * Reports a state change. nimState: connecting 0, connected 1, disconnected 3 (2 when
   * refused); rcStatus: joining, joined, quit.
   */
  #setState(state, extra) {
    const previous = this.#state;
    this.#state = state;
    const nimState = extra.nimState ?? (state === 'connecting' ? NimState.entering : NimState.entered);
    const rcStatus = state === 'connecting' ? 'joining' : state === 'connected' ? 'joined' : 'quit';
    const payload = { state, previous, nimState, rcStatus, at: this.#now() };
    for (const key of ['code', 'reason', 'willReconnect', 'delayMs', 'error']) {
      if (extra[key] !== undefined) payload[key] = extra[key];
    }
    this.#emit('state', payload);
  }

  // MARK: Commands

  /**
   * Sends a command; resolves with the answer's `ok` object. Rejects at once with code
   * "disconnected" while not connected (including while connecting); with the server's
   * error; with "timeout" after requestTimeoutMs; with "disconnected" if the socket closes first.
   * @param {string} op
   * @param {object} [args]
   * @returns {Promise<any>}
   */
  send(op, args = {}) {
    if (!this.#connected) {
      return Promise.reject(new RoomcastError('disconnected', `not connected: ${op} was not sent`));
    }
    return new Promise((resolve, reject) => {
      this.#write(op, args, (err, ok) => (err === null ? resolve(ok) : reject(err)));
    });
  }

  /**
   * Writes one command frame and registers its answer callback `done(err, ok)`, called exactly
   * once, synchronously with the answer (so bookkeeping precedes the next frame).
   */
  #write(op, args, done) {
    const id = this.#nextId++;
    if (this.#http) {
      // TR-3: posted to /client/ops; a token.refresh is authenticated by the new token (the
      // old one may have expired already).
      const timer = this.#setTimeout(() => this.#failOne(id, new RoomcastError('timeout', `no answer to ${op} within ${this.#timeoutMs} ms`)), this.#timeoutMs);
      this.#pending.set(id, { op, args, done, timer });
      if (!this.#http.submit(id, op, args, op === 'token.refresh' ? args.token : undefined)) {
        this.#pending.delete(id);
        this.#clearTimeout(timer);
        done(new RoomcastError('busy', `${op} was not sent: ${this.#fallback.maxQueuedOps} commands wait already`));
      }
      return;
    }
    const ws = this.#ws;
    try {
      ws.send(JSON.stringify({ id, op, args }));
    } catch (err) {
      done(new RoomcastError('disconnected', `${op} could not be sent: ${err?.message ?? err}`, { cause: err }));
      return;
    }
    // A join that gets no answer releases its room's waiting compact events (#failOne).
    const timer = this.#setTimeout(() => this.#failOne(id, new RoomcastError('timeout', `no answer to ${op} within ${this.#timeoutMs} ms`)), this.#timeoutMs);
    this.#pending.set(id, { op, args, done, timer });
  }

  /** Ends one command with an error of the client's (TR-3: a post that failed). */
  #failOne(id, error) {
    const p = this.#pending.get(id);
    if (!p) return;
    this.#pending.delete(id);
    this.#clearTimeout(p.timer);
    if (EPOCH_ANSWERS.has(p.op)) this.#releaseWaiting(this.#roomOf(p), undefined);
    p.done(error);
  }

  /** Rejects every command waiting for an answer with "disconnected". */
  #failPending() {
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of pending) {
      this.#clearTimeout(p.timer);
      p.done(new RoomcastError('disconnected', `the connection closed before the answer to ${p.op}`));
    }
  }

  // MARK: Incoming frames

  #receive(data) {
    let frame;
    try {
      if (typeof data === 'object' && data !== null) frame = data; // TR-3: a poll's event
      else if (typeof data !== 'string') throw new Error('not a text frame');
      else frame = JSON.parse(data);
      if (frame === null || typeof frame !== 'object') throw new Error('not an object');
    } catch (err) {
      this.#emit('error', { type: 'protocol', error: new RoomcastError('protocol', `unreadable frame from the server: ${err.message}`, { cause: err }) });
      return;
    }
    if (this.#compact && !('id' in frame)) {
      frame = this.#expand(frame);
      if (frame === null) return;
    }
    if (typeof frame.ev === 'string') this.#event(frame);
    else if ('id' in frame) this.#answer(frame);
    else this.#emit('error', { type: 'protocol', error: new RoomcastError('protocol', 'a frame with neither ev nor id') });
  }

  #answer(frame) {
    const e = frame.error;
    if (frame.id === null || frame.id === undefined) {
      // The server could not read one of our messages (it closes with 4000 next).
      const error = new RoomcastError(e?.code ?? 'protocol', e?.message ?? 'error without id', { field: e?.field });
      this.#emit('error', { type: 'protocol', error });
      return;
    }
    const p = this.#pending.get(frame.id);
    if (!p) return; // timed out already
    this.#pending.delete(frame.id);
    this.#clearTimeout(p.timer);
    if (e) {
      if (EPOCH_ANSWERS.has(p.op)) this.#releaseWaiting(this.#roomOf(p), undefined);
      p.done(new RoomcastError(e.code, e.message, { field: e.field }));
      return;
    }
    const ok = frame.ok ?? {};
    // The room's events that came before the answer go first, as a JSON connection's do: a
    // resume's replay moves the position the answer then keeps, and a rewind's messages (TR-4,
    // before the first position) are not taken for replays of what was seen.
    const roomId = this.#roomOf(p);
    // TR-5: the room's alias on this connection; its compact events after this answer carry it.
    if (EPOCH_ANSWERS.has(p.op) && Number.isInteger(ok.alias)) this.#aliases.set(ok.alias, ok.joinInfo?.room?.roomId ?? roomId);
    const epoch = ok.joinInfo?.room?.epoch ?? ok.epoch;
    const highest = EPOCH_ANSWERS.has(p.op) ? this.#releaseWaiting(roomId, epoch) : -1;
    this.#bookkeep(p.op, p.args, ok);
    // An event after the answer's position that came before it still counts as seen.
    const place = this.#positions.get(roomId);
    if (place && place.epoch === epoch && place.offset !== null && highest > place.offset) place.offset = highest;
    p.done(null, ok);
  }

  /** The room a join, switch or observe is about. */
  #roomOf(p) { return p.op === 'room.switch' ? p.args.to?.roomId : p.args.roomId; }

  /**
   * TR-5: a compact frame as the JSON encoding's event (the application sees the same objects).
   * A stream event's epoch is the room's, from its join or observe answer; one that comes before
   * that answer (a resume's replay, or events of the join's own change) waits for it: null.
   */
  #expand(f) {
    let ev, roomId, data;
    if (typeof f.m === 'string' || typeof f.m === 'number') {
      roomId = this.#roomNamed(f.m);
      if (roomId === undefined) return null;
      const message = { ...COMPACT_MESSAGE_DEFAULTS, roomId };
      for (const [key, value] of Object.entries(f)) {
        const long = COMPACT_MESSAGE_KEYS[key];
        if (long !== undefined) message[long] = COMPACT_FLAGS.has(long) ? value === 1 || value === true : value;
      }
      ev = 'room.message';
      data = { message };
    } else if (typeof f.e === 'string') {
      ev = f.e;
      roomId = f.r === undefined ? undefined : this.#roomNamed(f.r);
      if (f.r !== undefined && roomId === undefined) return null;
      data = f.d ?? {};
    } else {
      return f;
    }
    const out = { ev };
    if (roomId !== undefined) out.roomId = roomId;
    if (typeof f.p === 'string') out.epoch = f.p;
    if (typeof f.o === 'number') {
      out.offset = f.o;
      const waiting = this.#waitingForEpoch.get(roomId);
      if (waiting || this.#epochPending(roomId)) {
        if (waiting) waiting.push(out);
        else this.#waitingForEpoch.set(roomId, [out]);
        out.data = data;
        // Bounded: past MAX_WAITING_EVENTS they go on with the epoch known so far.
        if (waiting && waiting.length >= MAX_WAITING_EVENTS) this.#releaseWaiting(roomId, undefined);
        return null;
      }
      const epoch = this.#positions.get(roomId)?.epoch;
      if (typeof epoch === 'string') out.epoch = epoch;
    }
    out.data = data;
    return out;
  }

  /**
   * TR-5: the room id of a compact event's `m` or `r`: the id itself, or the room an alias stands
   * for (from this connection's answers). An alias no answer named cannot be placed: the event is
   * reported as a protocol error and dropped (undefined).
   */
  #roomNamed(value) {
    if (typeof value !== 'number') return value;
    const roomId = this.#aliases.get(value);
    if (roomId === undefined) {
      this.#emit('error', { type: 'protocol', error: new RoomcastError('protocol', `a compact event names room alias ${value}, which no answer gave`) });
    }
    return roomId;
  }

  /** Whether an answer that names the room's epoch is awaited. */
  #epochPending(roomId) {
    for (const p of this.#pending.values()) if (EPOCH_ANSWERS.has(p.op) && this.#roomOf(p) === roomId) return true;
    return false;
  }

  /**
   * Hands on the room's waiting compact events with the epoch the answer named (before the answer
   * resolves). Returns the highest offset among them (-1: none).
   */
  #releaseWaiting(roomId, epoch) {
    const waiting = this.#waitingForEpoch.get(roomId);
    if (!waiting) return -1;
    this.#waitingForEpoch.delete(roomId);
    const known = typeof epoch === 'string' ? epoch : this.#positions.get(roomId)?.epoch;
    let highest = -1;
    for (const event of waiting) {
      if (typeof known === 'string') event.epoch = known;
      if (typeof event.offset === 'number' && event.offset > highest) highest = event.offset;
      this.#event(event);
    }
    return highest;
  }

  /** What a successful answer changes in the client's own records (BX-1). */
  #bookkeep(op, args, ok) {
    switch (op) {
      case 'room.join':
        this.#trackJoin(args.roomId, args, ok.joinInfo);
        break;
      case 'room.switch': {
        this.#forgetJoined(args.from);
        const to = ok.joinInfo?.room?.roomId ?? args.to?.roomId;
        if (to !== undefined) this.#trackJoin(to, args, ok.joinInfo);
        break;
      }
      case 'room.leave':
        this.#forgetJoined(args.roomId);
        break;
      case 'room.leaveAll':
        for (const roomId of [...this.#joined.keys()]) this.#forgetJoined(roomId);
        break;
      case 'room.observe':
        this.#observed.add(args.roomId);
        this.#placeFromAnswer(args.roomId, ok.epoch, ok.offset);
        break;
      case 'room.unobserve':
        this.#observed.delete(args.roomId);
        if (!this.#joined.has(args.roomId)) this.#positions.delete(args.roomId);
        break;
      case 'token.refresh':
        this.#token = args.token;
        break;
    }
  }

  #trackJoin(roomId, args, joinInfo) {
    const profile = {};
    for (const key of REJOIN_PROFILE_FIELDS) if (args[key] !== undefined) profile[key] = args[key];
    this.#joined.set(roomId, profile);
    this.#placeFromAnswer(roomId, joinInfo?.room?.epoch, joinInfo?.offset);
  }

  /**
   * Sets a room's position from a join or observe answer, unless events already placed it in
   * the same epoch: a resume replays the missed events before the join answer, and those must
   * stay counted.
   */
  #placeFromAnswer(roomId, epoch, offset) {
    const p = this.#positions.get(roomId);
    if (p && p.epoch === epoch && p.offset !== null) return;
    this.#positions.set(roomId, { epoch: epoch ?? null, offset: typeof offset === 'number' ? offset : null, stream: this.#session?.stream ?? null });
  }

  #forgetJoined(roomId) {
    this.#joined.delete(roomId);
    if (!this.#observed.has(roomId)) this.#positions.delete(roomId);
  }

  #event(frame) {
    this.#attemptDelivered = true;
    const roomId = frame.roomId;
    const tracked = roomId !== undefined && (this.#joined.has(roomId) || this.#observed.has(roomId));
    if (tracked && typeof frame.epoch === 'string' && typeof frame.offset === 'number') {
      // BX-1: an event at or before the position already seen (a replay overlap) is dropped;
      // gaps are normal (some events exclude this client).
      const p = this.#positions.get(roomId);
      if (p && p.epoch === frame.epoch && p.offset !== null && frame.offset <= p.offset) return;
      this.#positions.set(roomId, { epoch: frame.epoch, offset: frame.offset, stream: this.#session?.stream ?? null });
    }
    const data = frame.data ?? {};
    switch (frame.ev) {
      case 'room.kicked':
        this.#forgetJoined(roomId);
        break;
      case 'room.status':
        if (data.status === 'destroyed') {
          this.#observed.delete(roomId);
          this.#forgetJoined(roomId);
        } else if (data.status === 'quit') {
          this.#forgetJoined(roomId);
        }
        break;
      case 'room.resume':
        // Not resumed: the old position means nothing now; the join answer sets the new one.
        if (data.resumed === false && this.#joined.has(roomId)) this.#positions.delete(roomId);
        break;
      case 'conversation.statusSynced':
        if (data.code === 0 && typeof data.cursor === 'number') this.#conversationCursor = data.cursor;
        break;
      case 'token.expired':
        this.#refreshExpiredToken();
        break;
    }
    this.#emit(frame.ev, frame);
    this.#emit('*', frame);
  }

  // MARK: Re-joining after a reconnect (BX-1, NIM-5)

  /** Joins a room again, resuming from its position when one is known. */
  #rejoin(roomId, profile) {
    const args = { roomId, ...profile, mode: 'join' };
    const p = this.#positions.get(roomId);
    if (p && p.epoch !== null && p.offset !== null && p.stream !== null) {
      args.resume = { epoch: p.epoch, stream: p.stream, offset: p.offset };
    }
    this.#write('room.join', args, (err) => {
      if (err === null || err.code === 'disconnected') return; // a later reconnect tries again
      if (err.code !== 'timeout') this.#forgetJoined(roomId);
      this.#emit('error', { type: 'rejoin', roomId, error: err });
    });
  }

  #reobserve(roomId) {
    this.#write('room.observe', { roomId }, (err) => {
      if (err === null || err.code === 'disconnected') return;
      if (err.code !== 'timeout') {
        this.#observed.delete(roomId);
        if (!this.#joined.has(roomId)) this.#positions.delete(roomId);
      }
      this.#emit('error', { type: 'reobserve', roomId, error: err });
    });
  }

  // MARK: Tokens

  /** token.expired: ask getToken for a new token and send token.refresh (one at a time). */
  async #refreshExpiredToken() {
    const getToken = this.#options.getToken;
    if (!getToken || this.#refreshingToken) return;
    this.#refreshingToken = true;
    try {
      const token = await getToken();
      if (typeof token !== 'string' || token === '') throw new RoomcastError('token', 'getToken returned no token');
      await this.send('token.refresh', { token });
    } catch (err) {
      const error = err instanceof RoomcastError ? err : new RoomcastError('token', `getToken failed: ${err?.message ?? err}`, { cause: err });
      this.#emit('error', { type: 'tokenRefresh', error });
    } finally {
      this.#refreshingToken = false;
    }
  }

  /** Replaces the connection's token (op token.refresh); later reconnects use it. */
  refreshToken(token) { return this.send('token.refresh', { token }); }

  // MARK: Convenience wrappers

  /** Joins a room (op room.join). `opts`: mode ("join" | "enter" | "create"), room, nickname, avatar, ext, notifyExt. */
  join(roomId, opts = {}) { return this.send('room.join', { roomId, ...opts }); }

  /** Leaves a room (op room.leave). */
  leave(roomId) { return this.send('room.leave', { roomId }); }

  /** Leaves every room (op room.leaveAll). */
  leaveAll() { return this.send('room.leaveAll', {}); }

  /**
   * Leaves `from` and enters `to` in one step (op room.switch). `to` is a room id or a room
   * configuration `{roomId, name?, ...}`; `opts`: createIfMissing, nickname, avatar, ext, notifyExt.
   */
  switchRoom(from, to, opts = {}) {
    return this.send('room.switch', { from, to: typeof to === 'string' ? { roomId: to } : to, ...opts });
  }

  /**
   * Sends a message (op room.send). The third argument is the message's `type` ("text", the
   * server's default, or "custom") or an options object: `type`; `priority` "high" | "normal" |
   * "low" (QS-1; ZIM's high / medium / low are high / normal / low); `messageType`, the type name
   * the app's type lists match; `transient` (QS-5: not stored, not replayed, dropped first).
   * Past the room's budget the promise rejects with code 42902 (QS-2).
   */
  sendMessage(roomId, content, typeOrOptions) {
    const args = { roomId, content };
    const opts = typeof typeOrOptions === 'string' ? { type: typeOrOptions } : (typeOrOptions ?? {});
    for (const key of SEND_OPTIONS) if (opts[key] !== undefined) args[key] = opts[key];
    return this.send('room.send', args);
  }

  /** Message history (op room.history); `opts`: limit, order, start, types. */
  history(roomId, opts = {}) { return this.send('room.history', { roomId, ...opts }); }
  /** Recalls a message (op room.recall, MO-1): your own within the app's window, any as a manager. */
  recall(roomId, messageId, notifyExt) {
    return this.send('room.recall', notifyExt === undefined ? { roomId, messageId } : { roomId, messageId, notifyExt });
  }

  /** Members, paged (op room.members); `opts`: after, limit, order, type. */
  members(roomId, opts = {}) { return this.send('room.members', { roomId, ...opts }); }

  /** The room's information (op room.info). */
  roomInfo(roomId) { return this.send('room.info', { roomId }); }

  /** Sets room attributes (op attributes.set); `opts`: autoDelete. */
  setAttributes(roomId, entries, opts = {}) { return this.send('attributes.set', { roomId, entries, ...opts }); }

  /** Removes room attributes (op attributes.remove). */
  removeAttributes(roomId, keys) { return this.send('attributes.remove', { roomId, keys }); }

  /** Room attributes, all or the keys given (op attributes.get). */
  getAttributes(roomId, keys) {
    const args = { roomId };
    if (keys !== undefined) args.keys = keys;
    return this.send('attributes.get', args);
  }

  /** Watches a room's stream without joining it (op room.observe; needs an observer token). */
  observe(roomId) { return this.send('room.observe', { roomId }); }

  /** Stops watching a room (op room.unobserve). */
  unobserve(roomId) { return this.send('room.unobserve', { roomId }); }
}
