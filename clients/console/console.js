// Roomcast live console (SPEC BX-3). Plain ES module, no build step, no dependencies besides the
// server's own client library (/client/roomcast.js, loaded on first use) and, optionally,
// Chart.js (window.Chart from /console/vendor/chart.min.js).
//
// Security rules kept throughout:
// - the app secret lives in sessionStorage only and leaves the page only as an HMAC;
// - server data is put into the DOM with textContent / attributes, never as HTML.

// ---------------------------------------------------------------------------------------------
// Small DOM helpers
// ---------------------------------------------------------------------------------------------

const $ = (id) => document.getElementById(id);

/**
 * Builds an element. `props`: `text` (textContent), `dataset` (data-* attributes), `on`
 * ({event: handler}), `hidden`, `disabled`; anything else becomes an attribute.
 */
function el(tag, props = {}, children = []) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'text') node.textContent = String(value);
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else if (key === 'on') for (const [ev, h] of Object.entries(value)) node.addEventListener(ev, h);
    else if (key === 'hidden' || key === 'disabled') node[key] = Boolean(value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of [].concat(children)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** A local date and time for a millisecond timestamp; '–' when absent. */
function formatTime(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms <= 0) return '–';
  return new Date(ms).toLocaleString();
}

function formatClock(ms) {
  return new Date(ms).toLocaleTimeString();
}

function debounce(fn, wait) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), wait);
  };
}

/** Calls `fn` once, `wait` ms after the first of a burst of calls (at most once per `wait`). */
function throttle(fn, wait) {
  let timer = null;
  return () => {
    if (timer !== null) return;
    timer = setTimeout(() => {
      timer = null;
      fn();
    }, wait);
  };
}

/** A table row holding one cell that spans the table, for "nothing here" lines. */
function emptyRow(columns, text) {
  return el('tr', { class: 'empty-row' }, el('td', { colspan: columns, text }));
}

// ---------------------------------------------------------------------------------------------
// Credentials and signed REST calls
// ---------------------------------------------------------------------------------------------

const STORAGE_KEY = 'roomcast.console.appKey';
const STORAGE_SECRET = 'roomcast.console.appSecret';
const encoder = new TextEncoder();

/** The signed-in app: its key and an HMAC key made from its secret (not extractable). */
let session = null;

function hex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, '0')).join('');
}

async function makeSession(appKey, secret) {
  if (!globalThis.crypto || !crypto.subtle) {
    throw new Error('Web Crypto is unavailable: open the console over HTTPS or on localhost.');
  }
  const hmacKey = await crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return { appKey, hmacKey };
}

function storedCredentials() {
  const appKey = sessionStorage.getItem(STORAGE_KEY);
  const secret = sessionStorage.getItem(STORAGE_SECRET);
  return appKey && secret ? { appKey, secret } : null;
}

function storeCredentials(appKey, secret) {
  sessionStorage.setItem(STORAGE_KEY, appKey);
  sessionStorage.setItem(STORAGE_SECRET, secret);
}

function clearCredentials() {
  sessionStorage.removeItem(STORAGE_KEY);
  sessionStorage.removeItem(STORAGE_SECRET);
}

/**
 * Percent-encodes everything but RFC 3986 unreserved characters, so that the browser's URL
 * parser sends the target exactly as signed (it would otherwise re-encode e.g. `'` in a query).
 */
function encode(value) {
  return encodeURIComponent(String(value)).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
}

/** A path from segments (each encoded) plus a query from the non-empty entries of `query`. */
function target(segments, query = {}) {
  const path = '/' + segments.map(encode).join('/');
  const pairs = Object.entries(query)
    .filter(([, v]) => v !== undefined && v !== null && v !== '')
    .map(([k, v]) => `${encode(k)}=${encode(v)}`);
  return pairs.length ? `${path}?${pairs.join('&')}` : path;
}

/** An error answered by the server: `{code, message, field}`, plus the HTTP status. */
class ApiError extends Error {
  constructor(status, body) {
    const code = body && typeof body.code === 'number' ? body.code : status;
    const message = (body && body.message) || `HTTP ${status}`;
    super(message);
    this.status = status;
    this.code = code;
    this.field = body && body.field ? body.field : '';
  }
  describe() {
    return `Error ${this.code}: ${this.message}${this.field ? ` (field: ${this.field})` : ''}`;
  }
}

/** The native Roomcast signature headers for one request (a fresh nonce every time). */
async function signatureHeaders(auth, method, requestTarget, bodyBytes) {
  const timestamp = String(Date.now());
  const nonce = hex(crypto.getRandomValues(new Uint8Array(16)));
  const bodyHash = hex(await crypto.subtle.digest('SHA-256', bodyBytes));
  const canonical = `${method}\n${requestTarget}\n${timestamp}\n${nonce}\n${bodyHash}`;
  const signature = hex(await crypto.subtle.sign('HMAC', auth.hmacKey, encoder.encode(canonical)));
  return {
    'X-Roomcast-Key': auth.appKey,
    'X-Roomcast-Timestamp': timestamp,
    'X-Roomcast-Nonce': nonce,
    'X-Roomcast-Signature': signature,
  };
}

/**
 * One signed REST call. `requestTarget` is the path plus query exactly as sent; `body` (an
 * object) is sent as JSON. Resolves to the parsed JSON answer; rejects with ApiError.
 */
async function api(method, requestTarget, body, auth = session) {
  if (!auth) throw new Error('Not signed in');
  const bodyText = body === undefined ? '' : JSON.stringify(body);
  const bodyBytes = encoder.encode(bodyText);
  const headers = await signatureHeaders(auth, method, requestTarget, bodyBytes);
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(requestTarget, {
      method,
      headers,
      body: body === undefined ? undefined : bodyBytes,
      cache: 'no-store',
      credentials: 'same-origin',
    });
  } catch (error) {
    throw new Error(`Cannot reach the server (${method} ${requestTarget.split('?')[0]}): ${error.message}`);
  }
  const text = await response.text();
  let json = null;
  if (text) {
    try { json = JSON.parse(text); } catch { json = null; }
  }
  if (!response.ok) throw new ApiError(response.status, json);
  return json || {};
}

// ---------------------------------------------------------------------------------------------
// Operator-facing errors
// ---------------------------------------------------------------------------------------------

function describeError(error) {
  if (error instanceof ApiError) return error.describe();
  if (error && error.name === 'RoomcastError') {
    return `Stream error ${error.code}: ${error.message}${error.field ? ` (field: ${error.field})` : ''}`;
  }
  return error && error.message ? error.message : String(error);
}

function showError(error) {
  const banner = $('error-banner');
  $('error-text').textContent = describeError(error);
  banner.dataset.code = error instanceof ApiError ? String(error.code) : '';
  banner.hidden = false;
}

function clearError() {
  $('error-banner').hidden = true;
  $('error-text').textContent = '';
}

// ---------------------------------------------------------------------------------------------
// Routing: #/rooms, #/rooms/<id>, #/moderation, #/moderation/<room id>, #/webhooks, #/metrics
// ---------------------------------------------------------------------------------------------

const VIEWS = ['signin-view', 'rooms-view', 'room-view', 'moderation-view', 'webhooks-view', 'metrics-view'];

/** Bumped on every navigation; async loads drop their results when it has moved on. */
let routeGeneration = 0;
/** Called when the current view is left (e.g. to stop observing a room). */
let leaveCurrentView = null;

function parseRoute(hash) {
  const parts = hash.replace(/^#\/?/, '').split('/');
  switch (parts[0]) {
    case 'rooms':
      if (parts.length > 1 && parts[1] !== '') {
        try { return { view: 'room', roomId: decodeURIComponent(parts.slice(1).join('/')) }; } catch { return { view: 'rooms' }; }
      }
      return { view: 'rooms' };
    case 'moderation':
      if (parts.length > 1 && parts[1] !== '') {
        try { return { view: 'moderation', roomId: decodeURIComponent(parts.slice(1).join('/')) }; } catch { return { view: 'moderation', roomId: '' }; }
      }
      return { view: 'moderation', roomId: '' };
    case 'webhooks': return { view: 'webhooks' };
    case 'metrics': return { view: 'metrics' };
    default: return { view: 'rooms' };
  }
}

function showView(id) {
  for (const view of VIEWS) $(view).hidden = view !== id;
  for (const link of document.querySelectorAll('#nav a')) {
    const active = link.id === `nav-${id.replace('-view', '')}` || (id === 'room-view' && link.id === 'nav-rooms');
    if (active) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

/** Runs the current view's leave hook, once. */
function leaveView() {
  const leave = leaveCurrentView;
  leaveCurrentView = null;
  if (leave) leave();
}

function route() {
  routeGeneration += 1;
  leaveView();
  if (!session) {
    showView('signin-view');
    return;
  }
  clearError();
  const r = parseRoute(location.hash);
  if (r.view === 'room') openRoom(r.roomId, routeGeneration);
  else if (r.view === 'moderation') openModeration(r.roomId, routeGeneration);
  else if (r.view === 'webhooks') openWebhooks(routeGeneration);
  else if (r.view === 'metrics') openMetrics();
  else openRooms(routeGeneration);
}

const isCurrent = (generation) => generation === routeGeneration;

// ---------------------------------------------------------------------------------------------
// Sign-in and sign-out
// ---------------------------------------------------------------------------------------------

/** Verifies credentials with GET /v1/settings; resolves to a session or rejects. */
async function verify(appKey, secret) {
  const candidate = await makeSession(appKey, secret);
  await api('GET', '/v1/settings', undefined, candidate);
  return candidate;
}

function enterApp(newSession) {
  session = newSession;
  $('whoami').textContent = `app ${session.appKey}`;
  $('nav').hidden = false;
  $('session').hidden = false;
  startMetrics();
  if (!location.hash || location.hash === '#' || location.hash === '#/') location.hash = '#/rooms';
  else route();
}

async function onSignIn(event) {
  event.preventDefault();
  const appKey = $('signin-key').value.trim();
  const secret = $('signin-secret').value;
  const errorLine = $('signin-error');
  errorLine.hidden = true;
  if (!appKey || !secret) return;
  const button = $('signin-submit');
  button.disabled = true;
  try {
    const verified = await verify(appKey, secret);
    storeCredentials(appKey, secret);
    $('signin-secret').value = '';
    enterApp(verified);
  } catch (error) {
    errorLine.textContent = describeError(error);
    errorLine.hidden = false;
  } finally {
    button.disabled = false;
  }
}

/** Forgets the credentials and everything shown, so that the next app starts afresh. */
function signOut() {
  clearCredentials();
  routeGeneration += 1;
  leaveView();
  stopLiveClient();
  stopMetrics();
  session = null;
  $('nav').hidden = true;
  $('session').hidden = true;
  $('whoami').textContent = '';
  clearError();
  for (const id of ['signin-key', 'signin-secret', 'rooms-prefix', 'rooms-name', 'rooms-min-online', 'rooms-max-online']) $(id).value = '';
  Object.assign(roomsPager, { cursor: null, nextCursor: null, page: 1 });
  for (const id of ['rooms-body', 'webhooks-list', 'events-list', 'modview-messages', 'words-list', 'audit-body']) $(id).replaceChildren();
  showView('signin-view');
}

// ---------------------------------------------------------------------------------------------
// Rooms directory (GET /v1/directory/rooms)
// ---------------------------------------------------------------------------------------------

const PAGE_SIZE = 20;
/** The directory pager: the cursor of the page shown, and the next one (null: last page). */
const roomsPager = { cursor: null, nextCursor: null, page: 1, request: 0 };

function roomsQuery(cursor) {
  return {
    prefix: $('rooms-prefix').value.trim(),
    name: $('rooms-name').value.trim(),
    minOnline: $('rooms-min-online').value.trim(),
    maxOnline: $('rooms-max-online').value.trim(),
    limit: PAGE_SIZE,
    cursor: cursor || '',
  };
}

function openRooms(generation) {
  showView('rooms-view');
  loadRooms(roomsPager.cursor, roomsPager.page, generation);
}

async function loadRooms(cursor, page, generation = routeGeneration) {
  const request = ++roomsPager.request; // only the latest search is shown
  try {
    const answer = await api('GET', target(['v1', 'directory', 'rooms'], roomsQuery(cursor)));
    if (!isCurrent(generation) || request !== roomsPager.request) return;
    roomsPager.cursor = cursor;
    roomsPager.page = page;
    roomsPager.nextCursor = answer.nextCursor || null;
    renderRooms(answer.rooms || []);
  } catch (error) {
    if (isCurrent(generation) && request === roomsPager.request) showError(error);
  }
}

function flag(text, on) {
  return on ? el('span', { class: `flag flag-${text}`, text }) : null;
}

function renderRooms(rooms) {
  const body = $('rooms-body');
  body.replaceChildren(...rooms.map((room) => {
    const href = `#/rooms/${encodeURIComponent(room.roomId)}`;
    return el('tr', {
      class: 'room-row clickable',
      dataset: { roomId: room.roomId, testid: 'room-row' },
      on: { click: (e) => { if (!e.target.closest('a')) location.hash = href; } },
    }, [
      el('td', {}, el('a', { href, class: 'mono', text: room.roomId })),
      el('td', { text: room.name || '' }),
      el('td', { class: 'num', dataset: { field: 'onlineCount' }, text: room.onlineCount ?? 0 }),
      el('td', { text: formatTime(room.createdAt) }),
      el('td', {}, [flag('muted', room.muted), flag('closed', room.open === false)]),
    ]);
  }));
  $('rooms-empty').hidden = rooms.length > 0;
  $('rooms-page').textContent = `Page ${roomsPager.page}`;
  $('rooms-next').disabled = !roomsPager.nextCursor;
  $('rooms-first').disabled = roomsPager.page === 1;
}

/** A new search starts from the first page. */
function searchRooms() {
  loadRooms(null, 1);
}

// ---------------------------------------------------------------------------------------------
// Live stream: one RoomcastClient with an observer token, opened on the first room view
// ---------------------------------------------------------------------------------------------

const OBSERVER_USER = 'console-observer';
/** Events that change what the room view lists: refresh it (debounced) when one arrives. */
const REFRESHING_EVENTS = new Set(['room.memberChanged', 'room.notification', 'room.ban', 'room.block', 'room.attributes', 'room.gap']);

const live = {
  client: null,
  connecting: null, // promise of a connected client
  ready: false, // connect() has resolved once
  state: 'idle',
  observed: null, // the room id being observed
  onEvent: null, // the room view's handler
};

async function issueObserverToken() {
  const answer = await api('POST', target(['v1', 'users', OBSERVER_USER, 'tokens']), { observer: true, ttlSeconds: 3600 });
  return answer.token;
}

function wsUrl() {
  return `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws`;
}

/** Shows the stream state in the header badge and the events panel. */
function setLiveState(state, detail = '') {
  live.state = state;
  for (const id of ['ws-state', 'events-state', 'modview-state']) {
    const badge = $(id);
    badge.dataset.state = state;
    badge.textContent = `${id === 'ws-state' ? 'stream: ' : ''}${state}${detail ? ` (${detail})` : ''}`;
  }
}

/** The library's `state` event ({state, willReconnect, delayMs, code, error}). */
function onClientState(client, event) {
  let detail = '';
  if (event.state === 'disconnected') {
    if (event.willReconnect) detail = `retry in ${Math.ceil((event.delayMs || 0) / 1000)} s`;
    else if (event.error) detail = describeError(event.error);
    else if (event.code !== undefined) detail = `closed ${event.code}`;
  }
  setLiveState(event.state, detail);
  if (event.state !== 'connected') {
    setObserving(false);
    return;
  }
  if (!live.ready) return; // the first connect: observeRoom carries on once connect() resolves
  // The library observes its rooms again after a reconnect. Stop watching rooms left while the
  // connection was down, and watch the room shown if its observe was refused meanwhile.
  for (const other of client.observedRooms) {
    if (other !== live.observed) client.unobserve(other).catch(() => {});
  }
  const roomId = live.observed;
  if (!roomId) {
    if (room && !room.watching) loadRoom(); // its first load failed, e.g. with the server down
    return;
  }
  if (client.observedRooms.includes(roomId)) {
    setObserving(true);
  } else {
    client.observe(roomId).then(() => { if (live.observed === roomId) setObserving(true); }, showError);
  }
}

/** The library's non-fatal problems that concern the operator. */
function onClientError(event) {
  if (event.type === 'reobserve' && event.roomId === live.observed) showError(event.error);
  else if (event.type === 'tokenRefresh') showError(event.error);
}

function dispatchFrame(frame) {
  if (live.onEvent && frame && frame.roomId === live.observed) live.onEvent(frame);
}

/** The connected client, creating and connecting it the first time. */
function liveClient() {
  if (live.connecting) return live.connecting;
  const auth = session;
  const connecting = (async () => {
    setLiveState('connecting');
    const { RoomcastClient } = await import('/client/roomcast.js');
    if (session !== auth || live.connecting !== connecting) throw new Error('signed out');
    const client = new RoomcastClient(wsUrl(), { getToken: issueObserverToken });
    live.client = client;
    client.on('state', (event) => { if (live.client === client) onClientState(client, event); });
    client.on('error', onClientError);
    client.on('*', (frame) => { if (live.client === client) dispatchFrame(frame); });
    await client.connect();
    live.ready = true;
    return client;
  })();
  live.connecting = connecting;
  connecting.catch(() => {
    if (live.connecting !== connecting) return; // signed out meanwhile
    // Refused (e.g. Origin not allowed, 4003): drop this client; the next room view tries again.
    live.connecting = null;
    live.ready = false;
    if (live.client) {
      const client = live.client;
      live.client = null;
      client.close();
    }
    if (live.state !== 'disconnected') setLiveState('error');
  });
  return connecting;
}

/** `data-observing` on the events panel's badge: "true" once the server confirmed the watch. */
function setObserving(on) {
  for (const id of ['events-state', 'modview-state']) $(id).dataset.observing = String(on);
}

async function observeRoom(roomId, onEvent) {
  live.observed = roomId;
  live.onEvent = onEvent;
  setObserving(false);
  const client = await liveClient();
  if (live.observed !== roomId) return; // left the view meanwhile
  await client.observe(roomId);
  if (live.observed === roomId) setObserving(true);
}

function unobserveRoom() {
  const roomId = live.observed;
  live.observed = null;
  live.onEvent = null;
  setObserving(false);
  if (roomId && live.client && live.state === 'connected') live.client.unobserve(roomId).catch(() => {});
}

function stopLiveClient() {
  live.observed = null;
  live.onEvent = null;
  const client = live.client;
  live.client = null;
  live.connecting = null;
  live.ready = false;
  if (client) {
    try { client.close(); } catch { /* already closed */ }
  }
  setLiveState('idle');
}

// ---------------------------------------------------------------------------------------------
// Room view
// ---------------------------------------------------------------------------------------------

const MEMBERS_PAGE = 100;
const MAX_EVENTS = 300;

/** The room shown: its id, the generation of its view, and the members pager. */
let room = null;

function roomPath(...more) {
  return ['v1', 'rooms', room.id, ...more];
}

function openRoom(roomId, generation) {
  room = { id: roomId, generation, membersCursor: null, membersRequest: 0, watching: false };
  showView('room-view');
  $('room-title').textContent = roomId;
  $('room-moderate').setAttribute('href', `#/moderation/${encodeURIComponent(roomId)}`);
  $('mod-status').textContent = '';
  $('mod-user').value = '';
  clearEvents();
  $('tag-send-status').textContent = '';
  for (const id of ['room-info', 'members-body', 'mutes-list', 'blocks-list', 'allowlist-list', 'protected-list', 'attributes-body', 'queue-body',
    'drops-body', 'tags-body']) {
    $(id).replaceChildren();
  }
  $('members-total').textContent = '';
  $('distribution-state').textContent = '–';
  $('members-more').hidden = true;
  $('members-empty').hidden = true;

  leaveCurrentView = () => {
    unobserveRoom();
    room = null;
  };
  loadRoom();
}

/**
 * Loads everything the room view shows. The room's info comes first: a missing room (or a
 * server out of reach) stops there, and the next refresh tries again.
 */
async function loadRoom() {
  if (!(await loadRoomInfo())) return;
  clearError(); // the room is reachable again: an earlier failure is over
  watchRoom();
  await loadRoomLists();
}

/** Starts the live stream of the room shown, once it is known to exist. */
function watchRoom() {
  const current = room;
  if (!current || current.watching) return;
  current.watching = true;
  const refresh = throttle(() => { if (room === current) loadRoom(); }, 1000);
  observeRoom(current.id, (frame) => {
    addEvent(frame);
    if (REFRESHING_EVENTS.has(frame.ev)) refresh();
  }).catch((error) => {
    if (room !== current) return;
    current.watching = false; // a later refresh tries again
    showError(error);
  });
}

/**
 * Runs `fetcher` for the room shown and hands its answer to `render` if still shown. Resolves
 * to whether it succeeded.
 */
async function roomCall(fetcher, render) {
  const current = room;
  if (!current) return false;
  try {
    const answer = await fetcher();
    if (room !== current || !isCurrent(current.generation)) return false;
    render(answer);
    return true;
  } catch (error) {
    if (room === current && isCurrent(current.generation)) showError(error);
    return false;
  }
}

function loadRoomInfo() {
  return roomCall(() => api('GET', target(roomPath())), (answer) => renderRoomInfo(answer.room || {}));
}

function loadRoomLists() {
  return Promise.all([
    loadMembers(false),
    roomCall(() => api('GET', target(roomPath('mutes'))), (a) => renderExpiries('mutes-list', a.users || [], 'unmute')),
    roomCall(() => api('GET', target(roomPath('blocks'))), (a) => renderExpiries('blocks-list', a.users || [], 'unblock')),
    roomCall(() => api('GET', target(roomPath('mute-allowlist'))), (a) => renderAllowlist(a.userIds || [])),
    roomCall(() => api('GET', target(roomPath('protected-senders'))), (a) => renderUserList('protected-list', a.userIds || [])),
    roomCall(fetchDrops, renderDrops),
    roomCall(() => api('GET', target(roomPath('tags'))), (a) => renderTags(a.tags || [])),
    roomCall(() => api('GET', target(roomPath('attributes'))), (a) => renderAttributes(a.entries || [])),
    roomCall(() => api('GET', target(roomPath('queue'))), (a) => renderQueue(a.elements || [])),
  ]);
}

function renderRoomInfo(info) {
  const rows = [
    ['Room id', info.roomId],
    ['Name', info.name],
    ['Online', info.onlineUserCount],
    ['Muted', info.muted ? 'yes (room-wide)' : 'no'],
    ['Open', info.open === false ? 'no (closed)' : 'yes'],
    ['Creator', info.creator || '–'],
    ['Created', formatTime(info.createdAt)],
    ['Epoch', info.epoch],
    ['Announcement', info.announcement || '–'],
  ];
  $('room-info').replaceChildren(...rows.flatMap(([name, value]) => [
    el('dt', { text: name }),
    el('dd', { dataset: { field: name.toLowerCase().replace(/\s+/g, '-') }, text: value ?? '–' }),
  ]));
  $('room-info').dataset.muted = String(Boolean(info.muted));
  renderDistribution(Boolean(info.distributionStopped));
}

// --- Delivery under overload (QS-6, QS-7) --------------------------------------------------------

/** The room's distribution state and the button that flips it. */
function renderDistribution(stopped) {
  const state = $('distribution-state');
  state.textContent = stopped ? 'stopped: messages are kept and sent to webhooks, no member receives them' : 'running';
  state.dataset.stopped = String(stopped);
  const button = $('distribution-toggle');
  button.textContent = stopped ? 'Resume distribution' : 'Stop distribution';
  button.dataset.stopped = String(stopped);
}

async function toggleDistribution() {
  if (!room) return;
  const current = room;
  const button = $('distribution-toggle');
  const stop = button.dataset.stopped !== 'true';
  button.disabled = true;
  try {
    await api('PUT', target(roomPath('distribution')), { stopped: stop });
    if (room !== current) return;
    clearError();
    await loadRoom();
  } catch (error) {
    if (room === current) showError(error);
  } finally {
    button.disabled = false;
  }
}

// --- Member tags (AU-1) --------------------------------------------------------------------------

/** The room's tags and how many present members carry each; a tag fills the send form. */
function renderTags(tags) {
  if (!tags.length) {
    $('tags-body').replaceChildren(emptyRow(2, 'No member carries a tag.'));
    return;
  }
  $('tags-body').replaceChildren(...tags.map((t) => el('tr', { dataset: { testid: 'tag-row', tag: t.tag } }, [
    el('td', {}, [el('button', {
      type: 'button', class: 'link', text: t.tag, dataset: { testid: 'tag-pick' },
      on: { click: () => { $('tag-send-tag').value = t.tag; $('tag-send-content').focus(); } },
    })]),
    el('td', { class: 'num', dataset: { field: 'count' }, text: String(t.count) }),
  ])));
}

/** Sends a message from the app server to the members carrying one tag. */
async function sendToTag() {
  const current = room;
  const tag = $('tag-send-tag').value.trim();
  const content = $('tag-send-content').value;
  if (!current || !tag || !content) return;
  try {
    const answer = await api('POST', target(roomPath('messages')), { content, targetTags: { tag } });
    if (room !== current) return;
    const id = (answer.message && answer.message.messageId) || answer.messageId || '';
    $('tag-send-status').textContent = `Sent ${id} to the members tagged ${tag}.`;
    $('tag-send-content').value = '';
  } catch (error) {
    if (room === current) showError(error);
  }
}

const DROP_CLASSES = ['high', 'normal', 'low', 'transient'];

/** The server's per-class drop and refusal counters from /metrics (the whole server, not per room). */
async function fetchDrops() {
  const response = await fetch('/metrics', { cache: 'no-store', credentials: 'same-origin' });
  if (!response.ok) throw new Error(`GET /metrics answered HTTP ${response.status}`);
  return parseClassCounters(await response.text(), ['roomcast_events_dropped_total', 'roomcast_messages_refused_total']);
}

/** `{name: {class: value}}` for each wanted counter labelled by class. */
function parseClassCounters(text, names) {
  const out = Object.fromEntries(names.map((n) => [n, {}]));
  for (const line of text.split('\n')) {
    const match = /^([A-Za-z_:][A-Za-z0-9_:]*)\{class="([a-z]+)"\}\s+(\S+)/.exec(line);
    if (!match || !(match[1] in out)) continue;
    const value = Number(match[3]);
    if (Number.isFinite(value)) out[match[1]][match[2]] = value;
  }
  return out;
}

function renderDrops(counters) {
  const dropped = counters.roomcast_events_dropped_total || {};
  const refused = counters.roomcast_messages_refused_total || {};
  $('drops-body').replaceChildren(...DROP_CLASSES.map((c) => el('tr', { dataset: { class: c, testid: 'drops-row' } }, [
    el('td', { text: c }),
    // High-priority messages are never dropped: the server has no counter for them.
    el('td', { class: 'num', dataset: { field: 'dropped' }, text: c === 'high' ? '0 (never dropped)' : String(dropped[c] ?? 0) }),
    el('td', { class: 'num', dataset: { field: 'refused' }, text: String(refused[c] ?? 0) }),
  ])));
}

/** Loads the first page of members, or (more = true) appends the next one. */
function loadMembers(more) {
  const cursor = more ? room && room.membersCursor : null;
  const query = { type: $('members-type').value, limit: MEMBERS_PAGE, cursor: cursor || '' };
  const request = room ? ++room.membersRequest : 0; // a newer load supersedes this one
  return roomCall(() => api('GET', target(roomPath('members'), query)), (answer) => {
    if (request !== room.membersRequest) return;
    const members = answer.members || [];
    renderMembers(members, more);
    room.membersCursor = members.length ? members[members.length - 1].userId : null;
    $('members-total').textContent = typeof answer.total === 'number' ? `(${answer.total})` : '';
    $('members-more').hidden = members.length < MEMBERS_PAGE;
  });
}

function memberState(member) {
  const states = [];
  states.push(member.isOnline === false ? 'offline' : 'online');
  if (member.isMuted) states.push('muted');
  if (member.isTempMuted) states.push(`temp-muted${member.tempMuteRemainingSeconds ? ` ${member.tempMuteRemainingSeconds}s` : ''}`);
  if (member.isBlocklisted) states.push('blocklisted');
  return states.join(', ');
}

function memberActions(userId) {
  const button = (action, text) => el('button', {
    type: 'button', class: 'small', dataset: { action, testid: `member-${action}`, userId },
    text, on: { click: () => moderate(action, userId) },
  });
  return el('td', { class: 'actions' }, [button('mute', 'Mute'), button('block', 'Block'), button('kick', 'Kick')]);
}

function renderMembers(members, append) {
  const body = $('members-body');
  const rows = members.map((m) => el('tr', {
    class: 'member-row',
    dataset: { userId: m.userId, role: m.type, testid: 'member-row' },
  }, [
    el('td', {}, [
      el('span', { class: 'mono', text: m.userId }),
      m.nickname ? el('span', { class: 'sub', text: m.nickname }) : null,
    ]),
    el('td', { dataset: { field: 'role' }, text: m.type }),
    el('td', { dataset: { field: 'state' }, text: memberState(m) }),
    memberActions(m.userId),
  ]));
  if (append) body.append(...rows);
  else body.replaceChildren(...rows);
  $('members-empty').hidden = body.children.length > 0;
}

/** Mutes or blocks: one list item per user with its expiry and an undo button. */
function renderExpiries(listId, users, undo) {
  const list = $(listId);
  if (!users.length) {
    list.replaceChildren(el('li', { class: 'empty', text: 'none' }));
    return;
  }
  list.replaceChildren(...users.map((u) => el('li', { dataset: { userId: u.userId } }, [
    el('span', { class: 'mono', text: u.userId }),
    el('span', { class: 'sub', text: u.until ? `until ${formatTime(u.until)}` : 'no expiry' }),
    el('button', {
      type: 'button', class: 'small', dataset: { action: undo, testid: `${undo}-button`, userId: u.userId },
      text: undo === 'unmute' ? 'Unmute' : 'Unblock', on: { click: () => moderate(undo, u.userId) },
    }),
  ])));
}

function renderAllowlist(userIds) {
  renderUserList('allowlist-list', userIds);
}

function renderUserList(listId, userIds) {
  const list = $(listId);
  if (!userIds.length) list.replaceChildren(el('li', { class: 'empty', text: 'none' }));
  else list.replaceChildren(...userIds.map((id) => el('li', { class: 'mono', dataset: { userId: id }, text: id })));
}

function renderAttributes(entries) {
  $('attributes-body').replaceChildren(...(entries.length ? entries.map((e) => el('tr', { dataset: { key: e.key } }, [
    el('td', { class: 'mono', text: e.key }),
    el('td', { class: 'value', text: e.value }),
    el('td', { text: `${e.owner || ''}${e.autoDelete ? ' (auto-delete)' : ''}` }),
  ])) : [emptyRow(3, 'none')]));
}

function renderQueue(elements) {
  $('queue-body').replaceChildren(...(elements.length ? elements.map((e) => el('tr', { dataset: { key: e.key } }, [
    el('td', { class: 'mono', text: e.key }),
    el('td', { class: 'value', text: e.value }),
  ])) : [emptyRow(2, 'none')]));
}

// --- Moderation --------------------------------------------------------------------------------

/** The moderation form's options: minutes (or none), needNotify and notifyExt. */
function moderationOptions() {
  const minutesText = $('mod-minutes').value.trim();
  const minutes = minutesText === '' ? undefined : Number(minutesText);
  const notifyExt = $('mod-notify-ext').value;
  return { minutes, needNotify: $('mod-notify').checked, notifyExt: notifyExt === '' ? undefined : notifyExt };
}

/** The REST call for one moderation action on `userId` (or the whole room). */
function moderationRequest(action, userId, opts) {
  const notify = { needNotify: opts.needNotify, notifyExt: opts.notifyExt };
  switch (action) {
    case 'mute':
      return ['POST', target(roomPath('mutes')), { userIds: [userId], minutes: opts.minutes, ...notify }];
    case 'block':
      return ['POST', target(roomPath('blocks')), { userIds: [userId], minutes: opts.minutes, ...notify }];
    case 'kick':
      return ['DELETE', target(roomPath('members', userId), { notifyExt: opts.notifyExt })];
    case 'unmute':
      return ['DELETE', target(roomPath('mutes'), { userIds: userId, needNotify: opts.needNotify ? 'true' : '', notifyExt: opts.notifyExt })];
    case 'unblock':
      return ['DELETE', target(roomPath('blocks'), { userIds: userId, needNotify: opts.needNotify ? 'true' : '', notifyExt: opts.notifyExt })];
    case 'room-mute-on':
      return ['PUT', target(roomPath('mute')), { muted: true, ...notify }];
    case 'room-mute-off':
      return ['PUT', target(roomPath('mute')), { muted: false, ...notify }];
    default:
      throw new Error(`unknown action ${action}`);
  }
}

const ACTION_DONE = {
  mute: 'Muted', block: 'Blocked', kick: 'Kicked', unmute: 'Unmuted', unblock: 'Unblocked',
  'room-mute-on': 'Room muted', 'room-mute-off': 'Room unmuted',
};

async function moderate(action, userId) {
  if (!room) return;
  const status = $('mod-status');
  const needsUser = !action.startsWith('room-');
  if (needsUser && !userId) {
    status.textContent = 'Enter a user id first.';
    status.dataset.result = 'error';
    return;
  }
  const current = room;
  const buttons = document.querySelectorAll('#room-view button');
  buttons.forEach((b) => { b.disabled = true; });
  try {
    const [method, requestTarget, body] = moderationRequest(action, userId, moderationOptions());
    await api(method, requestTarget, body);
    if (room !== current) return;
    status.textContent = `${ACTION_DONE[action]}${needsUser ? ` ${userId}` : ''}.`;
    status.dataset.result = 'ok';
    clearError();
    await (action.startsWith('room-') ? loadRoom() : loadRoomLists());
  } catch (error) {
    if (room !== current) return;
    status.textContent = describeError(error);
    status.dataset.result = 'error';
    showError(error);
  } finally {
    buttons.forEach((b) => { b.disabled = false; });
  }
}

// --- Live events panel -------------------------------------------------------------------------

let eventCount = 0;

function clearEvents() {
  eventCount = 0;
  $('events-list').replaceChildren();
  $('events-count').textContent = '0';
}

/** The time an event carries (data.time or data.operateTime), else when it arrived. */
function eventTime(frame) {
  const data = frame.data || {};
  const t = typeof data.time === 'number' ? data.time : data.operateTime;
  return typeof t === 'number' && t > 0 ? t : Date.now();
}

function addEvent(frame) {
  const list = $('events-list');
  const offset = typeof frame.offset === 'number' ? String(frame.offset) : '';
  const item = el('li', { class: 'event', dataset: { ev: frame.ev, offset, testid: 'event' } }, [
    el('div', { class: 'event-head' }, [
      el('span', { class: 'ev', text: frame.ev }),
      el('span', { class: 'offset', text: offset ? `#${offset}` : '' }),
      el('time', { text: formatClock(eventTime(frame)) }),
    ]),
    el('pre', { class: 'json', text: JSON.stringify(frame.data ?? null, null, 2) }),
  ]);
  list.prepend(item);
  while (list.children.length > MAX_EVENTS) list.lastElementChild.remove();
  eventCount += 1;
  $('events-count').textContent = String(eventCount);
}

// ---------------------------------------------------------------------------------------------
// Moderation view (MO-8): a room's live messages with a recall button each (the native recall,
// DELETE /v1/rooms/{roomId}/messages/{id}), the app's sensitive words (/v1/sensitive-words) and
// the audit trail (GET /v1/audit)
// ---------------------------------------------------------------------------------------------

const MAX_MESSAGES = 200;
const RECENT_MESSAGES = 20;
const AUDIT_PAGE = 50;
/** Events after which the audit trail is read again (someone moderated the room). */
const AUDITED_EVENTS = new Set(['message.recalled', 'room.ban', 'room.block', 'room.notification', 'room.kicked']);

/** The moderation view shown: the room watched ('' for none), its generation, the audit pager. */
let moderation = null;

function openModeration(roomId, generation) {
  const current = { roomId, generation, auditNext: null, auditRequest: 0 };
  moderation = current;
  showView('moderation-view');
  $('modview-room').value = roomId;
  $('modview-messages').replaceChildren();
  $('modview-count').textContent = '0';
  $('modview-empty').textContent = roomId ? 'No messages yet.' : 'Choose a room to watch.';
  $('modview-empty').hidden = false;
  $('modview-status').textContent = '';
  $('words-status').textContent = '';
  $('audit-room-only').disabled = !roomId;
  if (!roomId) $('audit-room-only').checked = false;
  leaveCurrentView = () => {
    unobserveRoom();
    moderation = null;
  };
  loadWords();
  loadAudit(false);
  if (roomId) watchModeration(current);
}

const isModerationShown = (current) => moderation === current && isCurrent(current.generation);

/** The room's recent messages (oldest first), then its live stream. */
async function watchModeration(current) {
  const refreshAudit = throttle(() => { if (isModerationShown(current)) loadAudit(false); }, 500);
  try {
    const answer = await api('GET', target(['v1', 'rooms', current.roomId, 'messages'], { order: 'desc', limit: RECENT_MESSAGES }));
    if (!isModerationShown(current)) return;
    for (const m of (answer.messages || []).slice().reverse()) addModerationMessage(current, m);
    await observeRoom(current.roomId, (frame) => {
      if (!isModerationShown(current)) return;
      const data = frame.data || {};
      if (frame.ev === 'room.message' && data.message) addModerationMessage(current, data.message);
      else if (frame.ev === 'message.recalled') markRecalled(data.messageId, data.operator);
      if (AUDITED_EVENTS.has(frame.ev)) refreshAudit();
    });
  } catch (error) {
    if (isModerationShown(current)) showError(error);
  }
}

function messageRow(id) {
  return [...$('modview-messages').children].find((li) => li.dataset.messageId === id) || null;
}

function addModerationMessage(current, m) {
  if (!m.messageId || messageRow(m.messageId)) return; // history and the stream may both bring it
  const list = $('modview-messages');
  const item = el('li', { class: 'message', dataset: { messageId: m.messageId, sender: m.sender || '', testid: 'modview-message' } }, [
    el('div', { class: 'event-head' }, [
      el('span', { class: 'mono', text: m.sender || '(app server)' }),
      el('time', { text: formatClock(typeof m.time === 'number' ? m.time : Date.now()) }),
      el('button', {
        type: 'button', class: 'small', dataset: { testid: 'recall-button', messageId: m.messageId },
        text: 'Recall', on: { click: () => recall(current, m.messageId) },
      }),
    ]),
    el('div', { class: 'content', dataset: { field: 'content' }, text: m.content ?? '' }),
  ]);
  list.prepend(item);
  while (list.children.length > MAX_MESSAGES) list.lastElementChild.remove();
  $('modview-empty').hidden = true;
  $('modview-count').textContent = String(list.children.length);
  if (m.recalled) markRecalled(m.messageId, '');
}

function markRecalled(messageId, operator) {
  const item = messageRow(messageId);
  if (!item) return;
  item.dataset.recalled = 'true';
  item.querySelector('[data-field="content"]').textContent = `recalled${operator ? ` by ${operator}` : ''}`;
  const button = item.querySelector('button');
  if (button) button.remove();
}

async function recall(current, messageId) {
  const status = $('modview-status');
  try {
    await api('DELETE', target(['v1', 'rooms', current.roomId, 'messages', messageId]));
    if (!isModerationShown(current)) return;
    markRecalled(messageId, '');
    status.textContent = `Recalled ${messageId}.`;
    status.dataset.result = 'ok';
    clearError();
    loadAudit(false);
  } catch (error) {
    if (!isModerationShown(current)) return;
    status.textContent = describeError(error);
    status.dataset.result = 'error';
    showError(error);
  }
}

async function loadWords() {
  const current = moderation;
  try {
    const answer = await api('GET', '/v1/sensitive-words');
    if (current && isModerationShown(current)) renderWords(answer.words || []);
  } catch (error) {
    if (current && isModerationShown(current)) showError(error);
  }
}

function renderWords(words) {
  $('words-count').textContent = `(${words.length})`;
  const list = $('words-list');
  if (!words.length) {
    list.replaceChildren(el('li', { class: 'empty', text: 'none' }));
    return;
  }
  list.replaceChildren(...words.map((w) => el('li', { dataset: { word: w.word, testid: 'word' } }, [
    el('span', { class: 'mono', text: w.word }),
    el('span', { class: 'sub', text: w.type === 'replace' ? `→ ${w.replacement}` : 'blocks' }),
    el('button', {
      type: 'button', class: 'small', dataset: { testid: 'word-remove', word: w.word }, text: 'Remove',
      on: { click: () => changeWords('DELETE', target(['v1', 'sensitive-words'], { words: w.word }), undefined, `Removed ${w.word}.`) },
    }),
  ])));
}

function addWord() {
  const word = $('words-word').value.trim();
  const replacement = $('words-replacement').value.trim();
  const status = $('words-status');
  if (!word) {
    status.textContent = 'Enter a word first.';
    status.dataset.result = 'error';
    return;
  }
  const entry = replacement ? { word, replacement } : { word };
  changeWords('POST', '/v1/sensitive-words', { words: [entry] }, `Added ${word}.`).then((ok) => {
    if (!ok) return;
    $('words-word').value = '';
    $('words-replacement').value = '';
  });
}

/** One change of the word list; resolves to whether it was made. */
async function changeWords(method, requestTarget, body, done) {
  const current = moderation;
  const status = $('words-status');
  try {
    await api(method, requestTarget, body);
    if (!current || !isModerationShown(current)) return false;
    status.textContent = done;
    status.dataset.result = 'ok';
    clearError();
    await Promise.all([loadWords(), loadAudit(false)]);
    return true;
  } catch (error) {
    if (current && isModerationShown(current)) {
      status.textContent = describeError(error);
      status.dataset.result = 'error';
      showError(error);
    }
    return false;
  }
}

/** The first page of the audit trail, or (more = true) the next older one appended. */
async function loadAudit(more) {
  const current = moderation;
  if (!current) return;
  const request = ++current.auditRequest; // a newer load supersedes this one
  const query = { limit: AUDIT_PAGE, before: more ? current.auditNext : '', roomId: $('audit-room-only').checked ? current.roomId : '' };
  try {
    const answer = await api('GET', target(['v1', 'audit'], query));
    if (!isModerationShown(current) || request !== current.auditRequest) return;
    renderAudit(answer.entries || [], more);
    current.auditNext = typeof answer.next === 'number' ? answer.next : null;
    $('audit-more').hidden = current.auditNext === null;
  } catch (error) {
    if (isModerationShown(current)) showError(error);
  }
}

function auditTarget(e) {
  const targets = (e.targets || []).join(', ');
  const more = e.targetCount > (e.targets || []).length ? ` (+${e.targetCount - e.targets.length})` : '';
  const parts = [e.messageId ? `message ${e.messageId}${targets ? ` of ${targets}` : ''}` : `${targets}${more}`];
  if (typeof e.durationMs === 'number') parts.push(`for ${Math.round(e.durationMs / 1000)} s`);
  if (e.detail) parts.push(e.detail);
  return parts.filter(Boolean).join(' · ');
}

function renderAudit(entries, append) {
  const body = $('audit-body');
  const rows = entries.map((e) => el('tr', {
    dataset: { testid: 'audit-row', id: String(e.id), action: e.action, surface: e.surface, messageId: e.messageId || '' },
  }, [
    el('td', { text: formatTime(e.time) }),
    el('td', { dataset: { field: 'action' }, text: e.action }),
    el('td', { dataset: { field: 'actor' }, text: e.actor && e.actor.type !== 'server' ? `${e.actor.type} ${e.actor.userId}` : 'app server' }),
    el('td', { dataset: { field: 'surface' }, text: e.surface }),
    el('td', { class: 'mono', text: e.roomId || '(app)' }),
    el('td', { class: 'value', dataset: { field: 'target' }, text: auditTarget(e) }),
  ]));
  if (append) body.append(...rows);
  else body.replaceChildren(...(rows.length ? rows : [emptyRow(6, 'No moderation actions recorded.')]));
}

// ---------------------------------------------------------------------------------------------
// Webhooks: endpoints, deliveries, dead letters and replay
// ---------------------------------------------------------------------------------------------

async function openWebhooks(generation) {
  showView('webhooks-view');
  try {
    const answer = await api('GET', '/v1/webhooks');
    if (!isCurrent(generation)) return;
    const endpoints = answer.endpoints || [];
    const sections = endpoints.map(endpointSection);
    $('webhooks-list').replaceChildren(...sections);
    $('webhooks-empty').hidden = endpoints.length > 0;
    await Promise.all(endpoints.map((e, i) => loadDeliveries(e.id, sections[i], generation)));
  } catch (error) {
    if (isCurrent(generation)) showError(error);
  }
}

function endpointSection(endpoint) {
  const state = endpoint.enabled ? 'enabled' : `disabled${endpoint.disabledReason ? ` (${endpoint.disabledReason})` : ''}`;
  return el('section', { class: 'panel endpoint', dataset: { endpointId: endpoint.id, testid: 'endpoint' } }, [
    el('h3', {}, [el('span', { class: 'mono', text: endpoint.id }), ' ', el('span', { class: 'sub', text: endpoint.url })]),
    el('p', { class: 'sub', text: `${endpoint.format} format · ${state} · events: ${(endpoint.events || []).join(', ') || 'all'}` }),
    el('h4', { text: 'Recent deliveries' }),
    el('div', { class: 'table-wrap' }, deliveryTable('deliveries')),
    el('div', { class: 'panel-head' }, [
      el('h4', { text: 'Dead letters' }),
      el('button', {
        type: 'button', class: 'small', dataset: { testid: 'replay-all', endpointId: endpoint.id }, text: 'Replay all', hidden: true,
      }),
      el('span', { class: 'status', dataset: { testid: 'replay-result' }, role: 'status' }),
    ]),
    el('div', { class: 'table-wrap' }, deliveryTable('dead')),
  ]);
}

const DELIVERY_COLUMNS = ['Message', 'Type', 'Status', 'Attempts', 'Last result', 'Updated'];

/** A deliveries table; in a narrow window its rows stack (labels from data-label). */
function deliveryTable(kind) {
  const headers = kind === 'dead' ? [...DELIVERY_COLUMNS, ''] : DELIVERY_COLUMNS;
  return el('table', { class: 'grid stack', dataset: { testid: `${kind}-table`, kind } }, [
    el('thead', {}, el('tr', {}, headers.map((h) => el('th', { text: h })))),
    el('tbody'),
  ]);
}

async function loadDeliveries(endpointId, section, generation) {
  const path = ['v1', 'webhooks', endpointId, 'deliveries'];
  const [recent, dead] = await Promise.all([
    api('GET', target(path, { limit: 20 })),
    api('GET', target(path, { status: 'dead', limit: 20 })),
  ]);
  if (!isCurrent(generation)) return;
  const recentBody = section.querySelector('table[data-kind="deliveries"] tbody');
  const deadBody = section.querySelector('table[data-kind="dead"] tbody');
  const recentRows = (recent.deliveries || []).map((d) => deliveryRow(d, 'delivery-row', null));
  const deadRows = (dead.deliveries || []).map((d) => deliveryRow(d, 'dead-row', () => replay(endpointId, [d.messageId], section, generation)));
  recentBody.replaceChildren(...(recentRows.length ? recentRows : [emptyRow(6, 'none')]));
  deadBody.replaceChildren(...(deadRows.length ? deadRows : [emptyRow(7, 'none')]));

  const replayAll = section.querySelector('[data-testid="replay-all"]');
  const deadIds = (dead.deliveries || []).map((d) => d.messageId);
  replayAll.hidden = deadIds.length < 2;
  replayAll.onclick = () => replay(endpointId, deadIds, section, generation);
}

function lastResult(d) {
  const parts = [];
  if (typeof d.lastStatus === 'number') parts.push(d.lastStatus === 0 ? 'no response' : `HTTP ${d.lastStatus}`);
  if (d.lastError) parts.push(d.lastError);
  return parts.join(' · ') || '–';
}

/** One delivery; `onReplay` adds a Replay button (dead letters). */
function deliveryRow(d, testid, onReplay) {
  const [message, type, status, attempts, result, updated] = DELIVERY_COLUMNS;
  const cells = [
    el('td', { class: 'mono', 'data-label': message, text: d.messageId }),
    el('td', { 'data-label': type, text: d.type }),
    el('td', { 'data-label': status }, el('span', { class: `flag status-${d.status}`, text: d.status })),
    el('td', { class: 'num', 'data-label': attempts, text: d.attempts }),
    el('td', { class: 'value', 'data-label': result, text: lastResult(d) }),
    el('td', { 'data-label': updated, text: formatTime(d.updatedAt) }),
  ];
  if (onReplay) {
    cells.push(el('td', {}, el('button', {
      type: 'button', class: 'small', dataset: { testid: 'replay-button', messageId: d.messageId }, text: 'Replay', on: { click: onReplay },
    })));
  }
  return el('tr', { dataset: { testid, messageId: d.messageId, status: d.status } }, cells);
}

async function replay(endpointId, messageIds, section, generation) {
  const result = section.querySelector('[data-testid="replay-result"]');
  const buttons = section.querySelectorAll('button');
  buttons.forEach((b) => { b.disabled = true; });
  try {
    const answer = await api('POST', target(['v1', 'webhooks', endpointId, 'replay']), { messageIds });
    if (!isCurrent(generation)) return;
    result.textContent = `Queued ${answer.queued} message${answer.queued === 1 ? '' : 's'} again.`;
    result.dataset.queued = String(answer.queued);
    await loadDeliveries(endpointId, section, generation);
  } catch (error) {
    if (isCurrent(generation)) {
      result.textContent = describeError(error);
      showError(error);
    }
  } finally {
    buttons.forEach((b) => { b.disabled = false; });
  }
}

// ---------------------------------------------------------------------------------------------
// Metrics: poll GET /metrics every 2 s, keep 5 minutes, chart with Chart.js
// ---------------------------------------------------------------------------------------------

const POLL_MS = 2000;
const KEEP_MS = 5 * 60 * 1000;
const METRIC_NAMES = ['roomcast_websockets_open', 'roomcast_events_total', 'roomcast_deliveries_total',
  'roomcast_webhook_delivered_total', 'roomcast_webhook_failed_attempts_total', 'roomcast_webhook_dead_total'];

const metrics = { timer: null, samples: [], charts: null, polling: false };

/** Sums each wanted metric across its label sets; a metric not yet exported counts as 0. */
function parsePrometheus(text) {
  const totals = Object.fromEntries(METRIC_NAMES.map((n) => [n, 0]));
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const match = /^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?\s+(\S+)/.exec(line);
    if (!match || !(match[1] in totals)) continue;
    const value = Number(match[3]);
    if (Number.isFinite(value)) totals[match[1]] += value;
  }
  return totals;
}

/** Per-second increase of a counter between two samples (0 across a reset). */
function rate(previous, sample, name) {
  const seconds = (sample.t - previous.t) / 1000;
  if (seconds <= 0) return 0;
  return Math.max(0, sample.values[name] - previous.values[name]) / seconds;
}

/** The series the charts show: a point per sample (x: seconds before now). */
function series() {
  const now = Date.now();
  const out = { connections: [], events: [], deliveries: [], delivered: [], failed: [], dead: [] };
  metrics.samples.forEach((s, i) => {
    const x = Math.round((s.t - now) / 100) / 10;
    out.connections.push({ x, y: s.values.roomcast_websockets_open });
    if (i === 0) return;
    const p = metrics.samples[i - 1];
    out.events.push({ x, y: rate(p, s, 'roomcast_events_total') });
    out.deliveries.push({ x, y: rate(p, s, 'roomcast_deliveries_total') });
    out.delivered.push({ x, y: rate(p, s, 'roomcast_webhook_delivered_total') });
    out.failed.push({ x, y: rate(p, s, 'roomcast_webhook_failed_attempts_total') });
    out.dead.push({ x, y: rate(p, s, 'roomcast_webhook_dead_total') });
  });
  return out;
}

function lastY(points) {
  return points.length ? points[points.length - 1].y : null;
}

function formatRate(value) {
  if (value === null) return '–';
  return value >= 100 ? value.toFixed(0) : value.toFixed(value >= 10 ? 1 : 2);
}

function renderMetricValues(s) {
  const c = lastY(s.connections);
  $('metric-connections').textContent = c === null ? '–' : String(c);
  $('metric-events-rate').textContent = formatRate(lastY(s.events));
  $('metric-deliveries-rate').textContent = formatRate(lastY(s.deliveries));
  $('metric-webhook-delivered-rate').textContent = formatRate(lastY(s.delivered));
  $('metric-webhook-failed-rate').textContent = formatRate(lastY(s.failed));
  $('metric-webhook-dead-rate').textContent = formatRate(lastY(s.dead));
}

async function pollMetrics() {
  if (metrics.polling) return;
  metrics.polling = true;
  const auth = session;
  try {
    const response = await fetch('/metrics', { cache: 'no-store', credentials: 'same-origin' });
    if (!response.ok) throw new Error(`GET /metrics answered HTTP ${response.status}`);
    const values = parsePrometheus(await response.text());
    if (session !== auth) return;
    const t = Date.now();
    metrics.samples.push({ t, values });
    while (metrics.samples.length && metrics.samples[0].t < t - KEEP_MS) metrics.samples.shift();
    $('metrics-error').hidden = true;
    updateCharts();
  } catch (error) {
    if (session === auth) {
      $('metrics-error').textContent = `Metrics unavailable: ${describeError(error)}`;
      $('metrics-error').hidden = false;
    }
  } finally {
    metrics.polling = false;
  }
}

function startMetrics() {
  stopMetrics();
  pollMetrics();
  metrics.timer = setInterval(pollMetrics, POLL_MS);
}

function stopMetrics() {
  clearInterval(metrics.timer);
  metrics.timer = null;
  metrics.samples = [];
  if (metrics.charts) for (const chart of Object.values(metrics.charts)) chart.destroy();
  metrics.charts = null;
  for (const id of ['metric-connections', 'metric-events-rate', 'metric-deliveries-rate',
    'metric-webhook-delivered-rate', 'metric-webhook-failed-rate', 'metric-webhook-dead-rate']) {
    $(id).textContent = '–';
  }
}

const COLORS = { blue: '#2563eb', green: '#16a34a', orange: '#ea580c', red: '#dc2626', violet: '#7c3aed' };

function lineChart(canvasId, datasets, integer) {
  return new window.Chart($(canvasId), {
    type: 'line',
    data: {
      datasets: datasets.map(([label, color]) => ({
        label, data: [], borderColor: color, backgroundColor: color, borderWidth: 2, pointRadius: 0, tension: 0,
      })),
    },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      normalized: true,
      interaction: { mode: 'nearest', axis: 'x', intersect: false },
      plugins: { legend: { display: datasets.length > 1 } },
      scales: {
        x: { type: 'linear', min: -KEEP_MS / 1000, max: 0, ticks: { callback: (v) => `${v}s` } },
        y: { beginAtZero: true, ticks: integer ? { precision: 0 } : {} },
      },
    },
  });
}

/** Creates the charts the first time the metrics view is shown (when Chart.js loaded). */
function ensureCharts() {
  if (metrics.charts) return true;
  if (typeof window.Chart !== 'function') {
    $('charts-unavailable').hidden = false;
    for (const canvas of document.querySelectorAll('#metrics-view canvas')) canvas.parentElement.hidden = true;
    return false;
  }
  metrics.charts = {
    connections: lineChart('chart-connections', [['WebSockets open', COLORS.blue]], true),
    events: lineChart('chart-events', [['events/s', COLORS.violet]], false),
    deliveries: lineChart('chart-deliveries', [['deliveries/s', COLORS.green]], false),
    webhooks: lineChart('chart-webhooks', [['delivered/s', COLORS.green], ['failed attempts/s', COLORS.orange], ['dead/s', COLORS.red]], false),
  };
  return true;
}

function updateCharts() {
  const s = series();
  renderMetricValues(s);
  if (!metrics.charts) return;
  const set = (chart, ...data) => {
    data.forEach((points, i) => { chart.data.datasets[i].data = points; });
    chart.update('none');
  };
  set(metrics.charts.connections, s.connections);
  set(metrics.charts.events, s.events);
  set(metrics.charts.deliveries, s.deliveries);
  set(metrics.charts.webhooks, s.delivered, s.failed, s.dead);
}

function openMetrics() {
  showView('metrics-view');
  if (ensureCharts()) updateCharts();
}

// ---------------------------------------------------------------------------------------------
// Wiring and start-up
// ---------------------------------------------------------------------------------------------

function wire() {
  $('signin-form').addEventListener('submit', onSignIn);
  $('signout').addEventListener('click', signOut);
  $('error-dismiss').addEventListener('click', clearError);

  $('rooms-form').addEventListener('submit', (e) => { e.preventDefault(); searchRooms(); });
  const typed = debounce(searchRooms, 350);
  for (const id of ['rooms-prefix', 'rooms-name', 'rooms-min-online', 'rooms-max-online']) $(id).addEventListener('input', typed);
  $('rooms-first').addEventListener('click', () => loadRooms(null, 1));
  $('rooms-next').addEventListener('click', () => { if (roomsPager.nextCursor) loadRooms(roomsPager.nextCursor, roomsPager.page + 1); });

  $('room-refresh').addEventListener('click', () => { clearError(); loadRoom(); });
  $('distribution-toggle').addEventListener('click', toggleDistribution);
  $('tag-send-form').addEventListener('submit', (e) => { e.preventDefault(); sendToTag(); });
  $('members-type').addEventListener('change', () => loadMembers(false));
  $('members-more').addEventListener('click', () => loadMembers(true));
  $('mod-form').addEventListener('submit', (e) => e.preventDefault());
  for (const action of ['mute', 'block', 'kick']) {
    $(`mod-${action}`).addEventListener('click', () => moderate(action, $('mod-user').value.trim()));
  }
  $('room-mute-on').addEventListener('click', () => moderate('room-mute-on'));
  $('room-mute-off').addEventListener('click', () => moderate('room-mute-off'));
  $('events-clear').addEventListener('click', clearEvents);

  $('modview-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const roomId = $('modview-room').value.trim();
    const hash = roomId ? `#/moderation/${encodeURIComponent(roomId)}` : '#/moderation';
    if (location.hash === hash) route();
    else location.hash = hash;
  });
  $('words-form').addEventListener('submit', (e) => { e.preventDefault(); addWord(); });
  $('audit-refresh').addEventListener('click', () => { clearError(); loadAudit(false); });
  $('audit-room-only').addEventListener('change', () => loadAudit(false));
  $('audit-more').addEventListener('click', () => loadAudit(true));

  $('webhooks-refresh').addEventListener('click', () => { clearError(); route(); });
  window.addEventListener('hashchange', route);
}

async function start() {
  wire();
  const saved = storedCredentials();
  if (!saved) {
    route();
    return;
  }
  try {
    enterApp(await verify(saved.appKey, saved.secret));
  } catch (error) {
    // Stale or revoked credentials: forget them and ask again.
    clearCredentials();
    route();
    $('signin-key').value = saved.appKey;
    $('signin-error').textContent = describeError(error);
    $('signin-error').hidden = false;
  }
}

start();
