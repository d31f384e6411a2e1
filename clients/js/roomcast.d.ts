// Type declarations for roomcast.js, the Roomcast browser client (BX-4).
// Protocol: openapi/websocket.md (ops, events, close codes, resume).

// MARK: Constants

/** NIM-5 connection states. */
export declare const NimState: Readonly<{ entering: 0; entered: 1; enterFailed: 2; connectionLost: 3 }>;
export type NimStateNumber = 0 | 1 | 2 | 3;

/** Close codes the server sends. */
export declare const CloseCode: Readonly<{
  normal: 1000; goingAway: 1001; protocolError: 1002; unsupportedData: 1003; abnormal: 1006;
  invalidPayload: 1007; messageTooBig: 1009; tryAgainLater: 1013; badMessage: 4000;
  notAuthenticated: 4001; tokenExpired: 4002; originNotAllowed: 4003; badToken: 4004; tooSlow: 4008;
  disconnectedByApp: 4010; disconnectedByAppReconnect: 4011; rateLimited: 4029;
}>;

/**
 * Close codes after which the client never reconnects (websocket.md Reconnect column "no"):
 * 1000, 1002, 1003, 1007, 1009, 4000, 4003, 4004, 4010. Every other code (1001, 1006, 1013,
 * 4001, 4002, 4008, ...) is retried with backoff when `autoReconnect` is on. The server sends 1000
 * only to echo the client's own close; a 1000 the client did not start (e.g. from a proxy) is
 * retried.
 */
export declare const NO_RECONNECT_CLOSE_CODES: readonly number[];

/** `{initialMs: 500, maxMs: 30000, factor: 2, jitter: 0.5}` */
export declare const DEFAULT_BACKOFF: Readonly<Required<BackoffOptions>>;

/** 10000 */
export declare const DEFAULT_REQUEST_TIMEOUT_MS: number;

/** TR-3: the transports, in fallback order. */
export declare const TRANSPORTS: readonly ['websocket', 'sse', 'poll'];
export type Transport = 'websocket' | 'sse' | 'poll';

/**
 * TR-3: `{handshakeTimeoutMs: 10000, failuresBeforeFallback: 2, probe: {initialMs: 5000,
 * maxMs: 120000, factor: 2, jitter: 0.5}, heartbeatTimeoutMs: 45000, pollWaitSeconds: 20,
 * maxQueuedOps: 1000, maxEventBytes: 1048576}` (see {@link FallbackOptions}).
 */
export declare const DEFAULT_FALLBACK: Readonly<Required<FallbackOptions>>;

/** TR-3: the HTTP base of a WebSocket URL (`wss://host/ws` → `https://host`). */
export declare function httpBaseOf(url: string): string;

/** Every event name the protocol defines. */
/** TR-5: the subprotocols of the two event encodings. */
export declare const ENCODINGS: Readonly<{ compact: 'roomcast.compact.v1'; json: 'roomcast.json.v1' }>;
export declare const EVENT_NAMES: readonly (keyof ServerEventMap)[];

/**
 * The delay before reconnect attempt `attempt` (0-based; reset after a successful connect),
 * with equal jitter: `base = min(maxMs, initialMs * factor ** attempt)`,
 * `delay = round(base * (1 - jitter * random()))` — uniform in `[base * (1 - jitter), base]`,
 * never above maxMs.
 */
export declare function backoffDelay(attempt: number, backoff?: BackoffOptions, random?: () => number): number;

// MARK: Errors

/**
 * A refused or failed command. `code` is the server's numeric code (openapi/errors.md) with its
 * `message` and `field`, or one of the client's own:
 * - `"timeout"`: no answer within `requestTimeoutMs`;
 * - `"disconnected"`: sent while not connected (rejected at once, nothing is sent; this includes
 *   the time between `connect()` and the connect answer), or the socket closed before the answer;
 * - `"closed"`: `close()` was called while `connect()` waited;
 * - `"protocol"`: the server sent a frame the client could not read;
 * - `"token"`: `getToken` failed or returned no token;
 * - `"busy"` (TR-3, over SSE or long-poll): `fallback.maxQueuedOps` commands already wait to be
 *   posted; nothing was sent.
 */
export declare class RoomcastError extends Error {
  constructor(code: number | string, message: string, more?: { field?: string; closeCode?: number; cause?: unknown });
  name: 'RoomcastError';
  code: number | 'timeout' | 'disconnected' | 'closed' | 'protocol' | 'token' | 'busy';
  field?: string;
  /** The WebSocket close code, when the error ended the connection. */
  closeCode?: number;
}

// MARK: Options

export interface BackoffOptions {
  /** Delay before the first retry, ms. Default 500. */
  initialMs?: number;
  /** Cap of every delay, ms. Default 30000. */
  maxMs?: number;
  /** Growth per failed attempt. Default 2. */
  factor?: number;
  /** Fraction of the delay taken off at random (equal jitter), 0..1. Default 0.5. */
  jitter?: number;
}

/**
 * TR-3: how the client falls back and comes back. An attempt that does not reach its session (a
 * WebSocket's connect answer, a stream's `hello`) fails: a WebSocket upgrade that fails (error or
 * close before open, or no open within handshakeTimeoutMs) or a server that cannot be reached
 * moves to the next transport at once; an attempt that reaches the server but is cut, garbled or
 * times out before its session (or whose session is cut within handshakeTimeoutMs without
 * delivering any event) does so after failuresBeforeFallback attempts in a row. After the
 * last transport, the next round starts again with the first, after the reconnect backoff. While
 * on SSE or long-poll the client tries the WebSocket again after `probe` backoff delays and moves
 * back to it once its connect is answered.
 */
export interface FallbackOptions {
  /** Bound on an attempt's upgrade and connect (or a stream's hello), ms. Default 10000. */
  handshakeTimeoutMs?: number;
  /** Attempts in a row that reach the server but no session before the next transport. Default 2. */
  failuresBeforeFallback?: number;
  /** Backoff between tries of the WebSocket while on a fallback. Default `{initialMs: 5000, maxMs: 120000, factor: 2, jitter: 0.5}`. */
  probe?: BackoffOptions;
  /** Silence after which an event stream counts as cut (the server's heartbeat is 15 s), ms. Default 45000. */
  heartbeatTimeoutMs?: number;
  /** A poll's wait, seconds (the server takes at most 30). Default 20. */
  pollWaitSeconds?: number;
  /** Commands waiting to be posted at most (more reject with "busy"). Default 1000. */
  maxQueuedOps?: number;
  /** The largest stream event or line, characters (a larger one drops the stream). Default 1 MiB. */
  maxEventBytes?: number;
}

/** Structural type of the WebSocket class the client needs (the browser's, or a test fake). */
export interface WebSocketLike {
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
  /** The subprotocol the server chose (browsers set it once open). */
  readonly protocol?: string;
}
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

export interface RoomcastClientOptions {
  /** A client token (JWT). Used for the first connect; reconnects use getToken when given. */
  token?: string;
  /**
   * Returns a fresh token. Called on the first connect when there is no `token`, before every
   * reconnect (including after close code 4002, token expired), and on `token.expired` (the
   * client then sends `token.refresh`; a failure is reported as an `error` event).
   */
  getToken?: () => string | Promise<string>;
  /** Anonymous independent-mode client (NIM-3) instead of a token. */
  anonymous?: { appKey: string; nickname?: string; avatar?: string };
  /** Device id sent with connect (the token's device claim wins). */
  device?: string;
  /**
   * CS-3 cursor sent with connect; the client keeps it up to date from
   * `conversation.statusSynced` (code 0) for later reconnects.
   */
  conversationCursor?: number;
  /** Default 10000. Applies to every command, connect included (a timed-out connect is retried). */
  requestTimeoutMs?: number;
  backoff?: BackoffOptions;
  /** Reconnect after a lost connection. Default true. */
  autoReconnect?: boolean;
  /**
   * TR-5: how events travel. Default `'compact'`: the client offers the subprotocol
   * `roomcast.compact.v1` (with `roomcast.json.v1` after it) and decodes the compact events, so
   * handlers get the same event objects either way. `'json'`: offers nothing (any server).
   */
  encoding?: 'compact' | 'json';
  /**
   * TR-3: the transport. Default `'auto'`: a WebSocket, falling back to Server-Sent Events
   * (`GET /sse`, read with fetch so the token travels in the Authorization header) and then to
   * long-polling (`GET /poll`), with commands posted to `/client/ops`; while on a fallback the
   * WebSocket is tried again now and then (see {@link FallbackOptions}). Every switch re-joins
   * each room with resume from the last position delivered, dropping replayed events already
   * delivered: no event is lost or delivered twice. `'websocket'`, `'sse'` or `'poll'`: that
   * transport only. Anonymous clients (and runtimes without fetch) use the WebSocket only: the
   * HTTP transports need a token. Over HTTP the session's connect carries the token only (not
   * `device` or `conversationCursor`).
   */
  transport?: 'auto' | Transport;
  /** TR-3: the HTTP base of `/sse`, `/poll` and `/client/ops`. Default: from the URL (`wss://host/ws` → `https://host`). */
  httpUrl?: string;
  /** TR-3: see {@link FallbackOptions}. */
  fallback?: FallbackOptions;
  /** TR-3: default `globalThis.fetch`. */
  fetch?: (input: string, init?: Record<string, any>) => Promise<any>;
  /** Default `globalThis.WebSocket`. */
  WebSocket?: WebSocketConstructor;
  /** Default `Math.random`; used for backoff jitter only. */
  random?: () => number;
  /** Default `globalThis.setTimeout`; used for backoff and request timeouts. */
  setTimeout?: (fn: () => void, ms: number) => unknown;
  /** Default `globalThis.clearTimeout`. */
  clearTimeout?: (handle: any) => void;
  /** Default `Date.now`; stamps `state` events (`at`). */
  now?: () => number;
}

// MARK: Answers

/** Answer to connect. */
export interface Connected {
  sessionId: string;
  userId: string;
  anonymous: boolean;
  /** The deployment's stream id, sent back in a join's resume. */
  stream: string;
  /** Token expiry (ms); null for anonymous clients. */
  expiresAt: number | null;
}

export interface RoomInfo {
  roomId: string;
  name: string;
  onlineUserCount: number;
  open: boolean;
  /** Changes when the room is destroyed and created again. */
  epoch: string;
  [key: string]: unknown;
}

export interface JoinInfo {
  memberCount: number;
  joinTime: number;
  /** The room stream's offset when the join took effect: the starting resume position. */
  offset?: number;
  room: RoomInfo;
}

/**
 * Answer to room.join and room.switch. `alias` (TR-5): on a compact WebSocket connection, the
 * room's number on this connection; the client maps it back, handlers always see the room id.
 */
export interface JoinReply { joinInfo: JoinInfo; alias?: number }

/** Answer to room.observe (`alias` as in JoinReply). */
export interface Observed { roomId: string; epoch: string; offset?: number; alias?: number }

/** A room's stream position as the client keeps it (BX-1); `offset` null: not known yet. */
export interface StreamPosition { epoch: string | null; offset: number | null; stream: string | null }

// MARK: Events

/** Every server event frame. Stream events (x-stream yes) carry `epoch` and `offset`. */
export interface EventFrame<E extends string = string, D = Record<string, any>> {
  ev: E;
  roomId?: string;
  epoch?: string;
  offset?: number;
  data: D;
}

export interface RoomStatusData {
  status: 'joining' | 'joined' | 'joinFailed' | 'reset' | 'quit' | 'destroyed';
  zimState: 'connecting' | 'connected' | 'disconnected';
  zimEvent: 'success' | 'activeSwitch' | 'switchFailed' | 'kickedOut' | 'roomNotExist' | 'enterFailed';
  time: number;
  autoRejoin?: boolean;
  code?: number;
  destroyType?: 'manual' | 'auto';
  joinInfo?: JoinInfo;
  nimState?: number;
}
export interface RoomKickedData { reason: number; time: number; ext?: string }
export interface RoomMemberChangedData { memberCount: number; members: Record<string, any>[] }
/** AU-4: who joined and left a big room since its last summary (ids absent for counts-only joins). */
export interface RoomMembersData { memberCount: number; joined: number; left: number; joinedIds?: string[]; leftIds?: string[]; time: number }
export interface RoomMultiLoginSyncData { reason: number; roomId: string; status: number; time: number; extra?: string }
export interface RoomBlockData { durationTime: number; operateTime: number; operateType: number; roomId: string; userIdList: string[]; extra?: string }
export interface RoomBanData { banType: number; durationTime: number; operateTime: number; roomId: string; userIdList: string[]; extra?: string }
export interface RoomNotificationData { eventType: number; ext: unknown; notifyExt: string; source: Record<string, any>; targets: Record<string, any>[]; time: number }
/** A room message (NIM-8); the QS fields appear only when they differ from a plain message. */
export interface RoomMessage {
  messageId: string;
  roomId: string;
  sender: string;
  type: 'text' | 'custom' | 'notification';
  content: string;
  time: number;
  fromServer?: boolean;
  /** QS-1: the class it travelled with; absent: normal. */
  priority?: 'high' | 'low';
  /** QS-1: its type name, as sent. */
  messageType?: string;
  /** QS-5: a transient message (no offset, never stored or replayed). */
  transient?: boolean;
  /** MO-1: a recalled message's tombstone (content empty). */
  recalled?: boolean;
  [field: string]: any;
}
export interface RoomMessageData { message: RoomMessage }
export interface RoomAttributesData { operator: string; removed: string[]; time: number; updated: Record<string, string> }
/** AU-1: this member's tags in the room, as the app server set them. */
/** MO-1: a message was recalled; `message` is its tombstone (recalled: true, no content). */
export interface MessageRecalledData { roomId: string; messageId: string; sender: string; operator: string; notifyExt?: string; time: number; message: RoomMessage }
export interface RoomTagsUpdatedData { roomId: string; tags: string[]; time: number }
/**
 * QS-3: what of the room this connection did not get because it read slower than the room (low,
 * transient, then normal messages; never high-priority ones or other events), sent in stream
 * order just before the room's next event this connection gets (or once it has room again).
 * `fromOffset`/`toOffset`: the stream offsets the lost events span (absent when only transient
 * messages, which have no offset, were lost). Received messages plus every gap's counts are what
 * the room sent. The frame carries `epoch` but no `offset` of its own.
 */
export interface RoomGapData {
  fromOffset?: number;
  toOffset?: number;
  dropped: { normal: number; low: number; transient: number };
}
export interface RoomResumeData { resumed: boolean; replayed: number; reason?: 'epochChanged' | 'serverRestarted' | 'outOfWindow' }
export interface InfoListData { infoList: Record<string, any>[] }
/** MO-3: a message of an ultra group's channel. */
export interface CommunityMessage {
  messageId: string; groupId: string; channelId: string; fromUserId: string; type: string; content: string; sentAt: number;
  fromServer: boolean; stored?: boolean; version?: number; editedAt?: number; targets?: string[];
  metadata?: { key: string; value: string; updatedAt: number }[];
}
export interface MessageUpdatedData { change: 'content' | 'metadata'; operator: string; time: number; message: CommunityMessage }
export interface GroupModerationChangedData {
  groupId: string; channelId: string;
  action: 'muteAdd' | 'muteRemove' | 'allowedSenderAdd' | 'allowedSenderRemove' | 'freeze' | 'unfreeze'; userIds: string[]; time: number;
}
export interface ConversationStatusSyncedData { code: number; cursor: number }
export interface TokenExpiredData { graceSeconds: number }

/** The protocol's events, by name. Handlers receive the whole frame. */
export interface ServerEventMap {
  'room.status': EventFrame<'room.status', RoomStatusData>;
  'room.kicked': EventFrame<'room.kicked', RoomKickedData>;
  'room.memberChanged': EventFrame<'room.memberChanged', RoomMemberChangedData>;
  'room.members': EventFrame<'room.members', RoomMembersData>;
  'room.multiLoginSync': EventFrame<'room.multiLoginSync', RoomMultiLoginSyncData>;
  'room.block': EventFrame<'room.block', RoomBlockData>;
  'room.ban': EventFrame<'room.ban', RoomBanData>;
  'room.notification': EventFrame<'room.notification', RoomNotificationData>;
  'room.message': EventFrame<'room.message', RoomMessageData>;
  'message.recalled': EventFrame<'message.recalled', MessageRecalledData>;
  'room.gap': EventFrame<'room.gap', RoomGapData>;
  'room.attributes': EventFrame<'room.attributes', RoomAttributesData>;
  'room.resume': EventFrame<'room.resume', RoomResumeData>;
  'room.tagsUpdated': EventFrame<'room.tagsUpdated', RoomTagsUpdatedData>;
  'group.channelTypeChanged': EventFrame<'group.channelTypeChanged', InfoListData>;
  'group.channelDisbanded': EventFrame<'group.channelDisbanded', InfoListData>;
  'group.channelUserKicked': EventFrame<'group.channelUserKicked', InfoListData>;
  'group.message': EventFrame<'group.message', CommunityMessage>;
  'message.updated': EventFrame<'message.updated', MessageUpdatedData>;
  'group.moderationChanged': EventFrame<'group.moderationChanged', GroupModerationChangedData>;
  'conversation.statusChanged': EventFrame<'conversation.statusChanged', InfoListData>;
  'conversation.statusSynced': EventFrame<'conversation.statusSynced', ConversationStatusSyncedData>;
  'token.expired': EventFrame<'token.expired', TokenExpiredData>;
}

export type ConnectionState = 'connecting' | 'connected' | 'disconnected';

/**
 * A connection state change. Mapping to the vendors' states:
 *
 * | state        | nimState (NIM-5)                                   | rcStatus (RC-1) |
 * |--------------|----------------------------------------------------|-----------------|
 * | connecting   | 0 entering                                         | joining         |
 * | connected    | 1 entered                                          | joined          |
 * | disconnected | 3 connectionLost (lost; reconnecting, autoReconnect off, or close()) | quit |
 * | disconnected | 2 enterFailed (refused by the server; no reconnect)  | quit            |
 *
 * `nimState` 2 (enterFailed) is reported when the server refused the client, so it will not
 * reconnect: an error answer to connect (except 40106 token expired when `getToken` can supply a
 * new one, and the server's try-again codes 5xxxx such as 50301), or a close code in {@link NO_RECONNECT_CLOSE_CODES} (e.g. 4003 Origin refused, 4004
 * invalid token; not an unsolicited 1000). Every other disconnection is 3 (connectionLost). Per-room RC-1 statuses and
 * NIM-5 states also arrive as `room.status` events.
 */
export interface StateEvent {
  state: ConnectionState;
  previous: ConnectionState;
  nimState: NimStateNumber;
  rcStatus: 'joining' | 'joined' | 'quit';
  /** `now()` at the change. */
  at: number;
  /** disconnected: the WebSocket close code (absent when no socket was made, e.g. getToken failed). */
  code?: number;
  reason?: string;
  /** disconnected: whether a reconnect is scheduled. */
  willReconnect?: boolean;
  /** disconnected with willReconnect: the backoff delay, ms. */
  delayMs?: number;
  /** disconnected after a refusal: the server's error (or a close-code error). */
  error?: RoomcastError;
}

/**
 * A non-fatal problem:
 * - `rejoin` / `reobserve`: a room could not be joined/observed again after a reconnect
 *   (`roomId`); the room is forgotten unless the error is a timeout;
 * - `tokenRefresh`: getToken or token.refresh failed after `token.expired`;
 * - `token`: getToken failed before a connect (the attempt counts as failed and is retried);
 * - `protocol`: an error answer with id null, or an unreadable frame;
 * - `handler`: an event handler threw (`event` names the event).
 */
export interface ErrorEvent {
  type: 'rejoin' | 'reobserve' | 'tokenRefresh' | 'token' | 'protocol' | 'handler';
  error: RoomcastError | unknown;
  roomId?: string;
  event?: string;
}

/** TR-3: the session moved to another transport (`previous` is null for the first session). */
export interface TransportEvent {
  transport: Transport;
  previous: Transport | null;
  /** `now()` at the change. */
  at: number;
}

/** Everything `on` accepts by name; any other string receives unknown server events. */
export interface RoomcastEventMap extends ServerEventMap {
  state: StateEvent;
  transport: TransportEvent;
  error: ErrorEvent;
  /** Every server event, after its own handlers. */
  '*': EventFrame;
}

// MARK: Client

/** What a message may ask for besides its content (room.send's args; SPEC §14). */
export interface SendMessageOptions {
  type?: 'text' | 'custom';
  /**
   * QS-1: the message's class (default normal). Under overload low messages are refused and
   * dropped first, then normal ones; high ones are never dropped. The app's protected senders
   * and types make a message high whatever is asked. ZIM's levels map as low → 'low',
   * medium → 'normal', high → 'high'.
   */
  priority?: 'high' | 'normal' | 'low';
  /** QS-1: the type name the app's lowPriorityMessageTypes and protectedMessageTypes match. */
  messageType?: string;
  /** QS-5 (ZIM barrage): not stored, no offset, not replayed, dropped first. */
  transient?: boolean;
}

export interface JoinOptions {
  /** join: the room must exist (server default); enter: create if missing; create: must not exist. */
  mode?: 'join' | 'enter' | 'create';
  /** Room configuration for enter/create (roomId defaults to the joined one). */
  room?: Record<string, unknown>;
  nickname?: string;
  avatar?: string;
  ext?: string;
  notifyExt?: string;
  /** Set by the client itself when it re-joins; apps normally leave it out. */
  resume?: { epoch: string; stream: string; offset: number };
  /** TR-4: the room's last messages first (1-50), before live events; not sent again on a re-join. */
  rewind?: number;
  /** AU-4: 'counts' for the room's member counts only (room.members without ids), never an event per member. */
  memberEvents?: 'all' | 'counts';
}

export interface SwitchOptions {
  createIfMissing?: boolean;
  nickname?: string;
  avatar?: string;
  ext?: string;
  notifyExt?: string;
}

/**
 * A Roomcast connection.
 *
 * Resume (BX-1): for every joined or observed room the client keeps `{epoch, offset, stream}`,
 * starting from the join answer (`joinInfo.room.epoch`, `joinInfo.offset`) and advanced by every
 * event frame with `roomId`, `epoch` and `offset`. Events at or before the position of the same
 * epoch are dropped, so a replay never delivers an event twice; gaps are normal. A room is
 * forgotten after room.leave / room.leaveAll, as the `from` of room.switch, on `room.kicked`, and
 * on `room.status` quit or destroyed. After a reconnect the client sends, before anything else,
 * `room.join {roomId, nickname?, avatar?, ext?, mode: "join", resume: {epoch, stream, offset}}`
 * for every room (the profile fields of the original join, the stream of the connection the
 * position was recorded on; without `resume` when the position is not known), then
 * `room.observe {roomId}` for every observed room (no resume). The server replays the missed
 * events and sends `room.resume`, which is emitted.
 */
export declare class RoomcastClient {
  constructor(url: string, options: RoomcastClientOptions);

  readonly state: ConnectionState;
  /** The last connect answer, or null. */
  readonly session: Connected | null;
  /** Joined rooms (re-joined after a reconnect). */
  readonly rooms: string[];
  /** Observed rooms (observed again after a reconnect). */
  readonly observedRooms: string[];
  /** The cursor the next connect sends. */
  readonly conversationCursor: number | undefined;
  /** TR-3: the transport of the current (or last) session; null before the first. */
  readonly transport: Transport | null;
  /** The kept stream position of a tracked room. */
  position(roomId: string): StreamPosition | undefined;

  /**
   * Connects. Resolves with the first successful connect answer (transient failures are retried
   * with backoff meanwhile); rejects when the client gives up (refusal, autoReconnect false,
   * close()). Already connected: resolves at once.
   */
  connect(): Promise<Connected>;
  /** Closes for good: no reconnect, pending commands reject ("disconnected"), rooms are forgotten. */
  close(): void;

  /** Adds a handler; returns a function that removes it. */
  on<K extends keyof RoomcastEventMap>(name: K, handler: (event: RoomcastEventMap[K]) => void): () => void;
  on(name: string, handler: (event: EventFrame) => void): () => void;
  off<K extends keyof RoomcastEventMap>(name: K, handler: (event: RoomcastEventMap[K]) => void): void;
  off(name: string, handler: (event: EventFrame) => void): void;

  /**
   * Sends any op; resolves with the answer's `ok`. Rejects at once with "disconnected" when not
   * connected; with the server's error; "timeout"; or "disconnected" if the socket closes first.
   */
  send<T = any>(op: string, args?: Record<string, unknown>): Promise<T>;

  join(roomId: string, opts?: JoinOptions): Promise<JoinReply>;
  leave(roomId: string): Promise<{}>;
  leaveAll(): Promise<{ roomIds: string[] }>;
  /** `to`: a room id, or a room configuration `{roomId, name?, ...}`. */
  switchRoom(from: string, to: string | ({ roomId: string } & Record<string, unknown>), opts?: SwitchOptions): Promise<JoinReply>;
  /** op room.send; the third argument is the message's type or {@link SendMessageOptions}. */
  sendMessage(roomId: string, content: string, typeOrOptions?: 'text' | 'custom' | SendMessageOptions): Promise<{ message: Record<string, any> }>;
  /** op room.recall (MO-1): your own message within the app's recallWindowSeconds; any as the room's creator or a manager. */
  recall(roomId: string, messageId: string, notifyExt?: string): Promise<Record<string, never>>;
  history(roomId: string, opts?: { limit?: number; order?: 'asc' | 'desc'; start?: number; types?: ('text' | 'custom' | 'notification')[] }): Promise<{ messages: Record<string, any>[] } & Record<string, any>>;
  members(roomId: string, opts?: { after?: string; limit?: number; order?: 'asc' | 'desc'; type?: 'present' | 'regular' | 'temporary' | 'regularOnline' | 'temporaryNewestFirst' }): Promise<Record<string, any>>;
  roomInfo(roomId: string): Promise<Record<string, any>>;
  setAttributes(roomId: string, entries: Record<string, string>, opts?: { autoDelete?: boolean }): Promise<Record<string, any>>;
  removeAttributes(roomId: string, keys: string[]): Promise<{ keys: string[] }>;
  getAttributes(roomId: string, keys?: string[]): Promise<Record<string, any>>;
  /** Needs a token issued with observer: true. */
  observe(roomId: string): Promise<Observed>;
  unobserve(roomId: string): Promise<{}>;
  /** op token.refresh; later reconnects use the new token (unless getToken is given). */
  refreshToken(token: string): Promise<{}>;
}
