// Roomcast browser client (BX-4). One ES module, no dependencies, no build step.
//
// Protocol: openapi/websocket.md. Every op is a promise (`send`), every event a handler (`on`),
// the client reconnects with backoff and jitter, re-joins the rooms it was in with gap-free
// resume (BX-1), refreshes its token through an app-supplied callback, and reports connection
// states mapped to the vendors' (NIM-5 numbers, RC-1 statuses).
//
// Runs in modern browsers and in Node 20+ (pass a WebSocket class with the `WebSocket` option).
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

/**
 * A Roomcast WebSocket client. See roomcast.d.ts for the documented API.
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
    if (typeof this.#WebSocket !== 'function') {
      throw new TypeError('no WebSocket class: pass options.WebSocket');
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
    const wasActive = this.#ws !== null || this.#reconnectTimer !== null || this.#state !== 'disconnected';
    this.#closed = true;
    this.#generation++;
    if (this.#reconnectTimer !== null) {
      this.#clearTimeout(this.#reconnectTimer);
      this.#reconnectTimer = null;
    }
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
    let ws;
    try {
      // TR-5: compact unless the application asked for JSON (then nothing is offered: any server speaks it).
      ws = this.#options.encoding === 'json' ? new this.#WebSocket(this.#url) : new this.#WebSocket(this.#url, [ENCODINGS.compact, ENCODINGS.json]);
    } catch (err) {
      // A malformed URL or a blocked port: trying again would fail the same way.
      this.#lost(undefined, String(err?.message ?? err), true, new RoomcastError('disconnected', String(err?.message ?? err), { cause: err }));
      return;
    }
    this.#ws = ws;
    ws.onopen = () => {
      if (this.#ws !== ws) return;
      this.#compact = ws.protocol === ENCODINGS.compact;
      this.#waitingForEpoch.clear();
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
    const args = { token: this.#token };
    if (o.device !== undefined) args.device = o.device;
    if (this.#conversationCursor !== undefined) args.conversationCursor = this.#conversationCursor;
    return args;
  }

  /** The connect answer: re-join and re-observe, then report the state and resolve connect(). */
  #connectedWith(ok) {
    this.#connected = true;
    this.#failures = 0;
    this.#session = ok;
    for (const [roomId, profile] of this.#joined) this.#rejoin(roomId, profile);
    for (const roomId of this.#observed) this.#reobserve(roomId);
    this.#setState('connected', {});
    const waiters = this.#connectWaiters;
    this.#connectWaiters = [];
    for (const w of waiters) w.resolve(ok);
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

  /** The socket closed (not by close()): decide whether and when to connect again. */
  #socketClosed(code, reason) {
    if (this.#ws) this.#detach(this.#ws);
    this.#ws = null;
    this.#connected = false;
    this.#failPending();
    const refusal = this.#refusal;
    this.#refusal = null;
    if (refusal) {
      // A refused connect is final, except for an expired token we can replace and the
      // server's "try again" codes (5xxxx: store unavailable, starting or shutting down).
      const transient = typeof refusal.code === 'number' && refusal.code >= 50000 && refusal.code < 60000;
      const retry = transient || (refusal.code === TOKEN_EXPIRED_ERROR && Boolean(this.#options.getToken));
      refusal.closeCode = code;
      this.#lost(code, reason, !retry, refusal);
      return;
    }
    // 1000 is never refused here: the server only echoes a close we started (and close()
    // detaches first), so a 1000 we did not ask for comes from something in between (a proxy).
    const refused = code !== CloseCode.normal && NO_RECONNECT_CLOSE_CODES.includes(code);
    this.#lost(code, reason, refused, refused ? new RoomcastError('disconnected', `closed by the server (${code}${reason ? ': ' + reason : ''})`, { closeCode: code }) : undefined);
  }

  /**
   * The connection is gone: report "disconnected", then schedule the next attempt or give up.
   * @param {number|undefined} code close code
   * @param {string|undefined} reason
   * @param {boolean} refused the server refused us; never retried
   * @param {RoomcastError} [error]
   */
  #lost(code, reason, refused, error) {
    const willReconnect = !refused && this.#options.autoReconnect !== false && !this.#closed;
    const extra = { code, reason, nimState: refused ? NimState.enterFailed : NimState.connectionLost, willReconnect };
    if (error) extra.error = error;
    if (willReconnect) {
      const delayMs = backoffDelay(this.#failures, this.#backoff, this.#random);
      this.#failures++;
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
    const ws = this.#ws;
    try {
      ws.send(JSON.stringify({ id, op, args }));
    } catch (err) {
      done(new RoomcastError('disconnected', `${op} could not be sent: ${err?.message ?? err}`, { cause: err }));
      return;
    }
    const timer = this.#setTimeout(() => {
      if (!this.#pending.delete(id)) return;
      done(new RoomcastError('timeout', `no answer to ${op} within ${this.#timeoutMs} ms`));
    }, this.#timeoutMs);
    this.#pending.set(id, { op, args, done, timer });
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
      if (typeof data !== 'string') throw new Error('not a text frame');
      frame = JSON.parse(data);
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
    if (typeof f.m === 'string') {
      roomId = f.m;
      const message = { ...COMPACT_MESSAGE_DEFAULTS, roomId };
      for (const [key, value] of Object.entries(f)) {
        const long = COMPACT_MESSAGE_KEYS[key];
        if (long !== undefined) message[long] = COMPACT_FLAGS.has(long) ? value === 1 || value === true : value;
      }
      ev = 'room.message';
      data = { message };
    } else if (typeof f.e === 'string') {
      ev = f.e;
      roomId = f.r;
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
        return null;
      }
      const epoch = this.#positions.get(roomId)?.epoch;
      if (typeof epoch === 'string') out.epoch = epoch;
    }
    out.data = data;
    return out;
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
