"""BX-4 in a real browser: the client library served at /client/roomcast.js, imported by pages on
another origin (as an app's pages would), in headless Chromium.

- two pages join a room and exchange messages (neither gets its own message back as an event);
- the server is killed (-9) and started again on the same data directory: the page reconnects by
  itself, re-joins with resume and receives every event published meanwhile, once, in order;
- a short-lived token is refreshed through getToken, and the connection outlives the grace;
- the README's example page (clients/examples/chat.html) shows a message sent through REST.

Run by scripts/browser-tests.sh."""

import http.server
import threading
import time
import urllib.parse

from browser_harness import browser, page_problems, wait_until

# A page's script: import the library from the gateway and keep what it sees on window.rc.
SETUP = """
const [gateway, user, room, ttl, initialMs, done] = arguments;
(async () => {
  const { RoomcastClient } = await import(gateway + "/client/roomcast.js");
  const rc = window.rc = { messages: [], frames: [], states: [], errors: [], tokens: 0, resumes: [] };
  rc.client = new RoomcastClient(gateway.replace(/^http/, "ws") + "/ws", {
    getToken: async () => { rc.tokens += 1; return (await fetch(`/token?user=${user}&ttl=${ttl}`)).text(); },
    backoff: { initialMs, maxMs: 4000, factor: 2, jitter: 0 },
  });
  rc.client.on("room.message", (e) => { rc.messages.push(e.data.message.content); rc.frames.push(e); });
  rc.client.on("room.resume", (e) => rc.resumes.push(e.data));
  rc.client.on("state", (s) => rc.states.push(s.state));
  rc.client.on("error", (e) => rc.errors.push(`${e.type}: ${e.error && (e.error.code + " " + e.error.message)}`));
  await rc.client.connect();
  await rc.client.join(room, { mode: "enter" });
  return "ok";
})().then(done, (e) => done("failed: " + (e && (e.stack || e.message || e.code))));
"""


class AppOrigin:
    """The app's own web server on another origin: a blank page, the example page, and /token
    (which asks roomcast for a user token, as an app server does)."""

    def __init__(self, gateway, example_path):
        origin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                url = urllib.parse.urlparse(self.path)
                q = urllib.parse.parse_qs(url.query)
                if url.path == "/token":
                    body = gateway.token(q.get("user", ["example"])[0], ttl=int(q.get("ttl", ["3600"])[0])).encode()
                    kind = "text/plain"
                elif url.path == "/app.html":
                    body, kind = b"<!doctype html><meta charset=utf-8><title>app</title><p>app page</p>", "text/html"
                elif url.path == "/example.html":
                    body, kind = open(example_path, "rb").read(), "text/html"
                elif url.path == "/favicon.ico":
                    body, kind = b"", "image/x-icon"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        _ = origin

    def close(self):
        self.server.shutdown()


def open_page(driver, origin, gateway, user, room, ttl=3600, initial_ms=500):
    driver.get(origin.base + "/app.html")
    result = driver.execute_async_script(SETUP, gateway.base, user, room, ttl, initial_ms)
    assert result == "ok", f"{user}: {result}"


def rc(driver, expr):
    return driver.execute_script("return window.rc." + expr)


def test_two_pages_exchange_messages(gateway, origin, report):
    gateway.ok("POST", "/v1/rooms", {"roomId": "lobby"})
    a, b = browser(), browser()
    try:
        open_page(a, origin, gateway, "alice", "lobby")
        open_page(b, origin, gateway, "bob", "lobby")
        a.execute_async_script("const done = arguments[0]; window.rc.client.sendMessage('lobby', 'hello from alice').then(() => done(1), (e) => done(String(e)))")
        wait_until(lambda: rc(b, "messages").count("hello from alice") == 1, what="bob receives alice's message")
        b.execute_async_script("const done = arguments[0]; window.rc.client.sendMessage('lobby', 'hello from bob').then(() => done(1), (e) => done(String(e)))")
        wait_until(lambda: "hello from bob" in rc(a, "messages"), what="alice receives bob's message")
        time.sleep(0.3)
        # Each page sees the other's message once, and never its own as an event.
        assert rc(a, "messages") == ["hello from bob"], rc(a, "messages")
        assert rc(b, "messages") == ["hello from alice"], rc(b, "messages")
        for d in (a, b):
            assert page_problems(d) == [], page_problems(d)
        report("two pages exchange messages through /client/roomcast.js imported cross-origin")
    finally:
        a.quit()
        b.quit()


def test_reconnect_resumes_every_missed_event(gateway, origin, report):
    gateway.ok("POST", "/v1/rooms", {"roomId": "resume-room", "keepAlive": True})
    d = browser()
    try:
        # A long first backoff, so the messages below are published before the page is back.
        open_page(d, origin, gateway, "carol", "resume-room", initial_ms=2500)
        gateway.ok("POST", "/v1/rooms/resume-room/messages", {"content": "before"})
        wait_until(lambda: rc(d, "messages") == ["before"], what="the first message")
        gateway.stop(kill=True)
        wait_until(lambda: "disconnected" in rc(d, "states"), what="the page sees the connection drop")
        gateway.start()
        missed = [f"missed {i}" for i in range(5)]
        for m in missed:
            gateway.ok("POST", "/v1/rooms/resume-room/messages", {"content": m})
        wait_until(lambda: len(rc(d, "resumes")) == 1, timeout=20, what="room.resume after the reconnect")
        time.sleep(0.3)
        assert rc(d, "resumes")[0]["resumed"] is True, rc(d, "resumes")
        assert rc(d, "messages") == ["before", *missed], rc(d, "messages")
        # Offsets rise, no event twice.
        offsets = [f["offset"] for f in rc(d, "frames")]
        assert offsets == sorted(set(offsets)), offsets
        gateway.ok("POST", "/v1/rooms/resume-room/messages", {"content": "after"})
        wait_until(lambda: rc(d, "messages")[-1:] == ["after"], what="live delivery after the resume")
        assert rc(d, "tokens") >= 2, "getToken is asked again on reconnect"
        states = rc(d, "states")
        assert states[-1] == "connected" and "connecting" in states[states.index("disconnected"):], states
        # Chromium logs the refused attempts while the server was down, if the page made any
        # (TR-3: a WebSocket that cannot connect is followed by tries of /sse and /poll).
        problems = page_problems(d, allow=("WebSocket connection to", "net::ERR_CONNECTION_REFUSED"))
        assert problems == [], problems
        report(f"kill -9 + restart: the page reconnected, resumed and got {len(missed)} missed messages once, in order")
    finally:
        d.quit()


def test_token_refresh_through_get_token(gateway, origin, report, grace):
    gateway.ok("POST", "/v1/rooms", {"roomId": "tokens"})
    d = browser()
    try:
        open_page(d, origin, gateway, "dave", "tokens", ttl=2)
        # The token expires after ~2 s; without a refresh the server closes with 4002 after the grace.
        time.sleep(2 + grace + 2)
        assert rc(d, "tokens") >= 2, f"getToken was asked {rc(d, 'tokens')} time(s)"
        assert rc(d, "states").count("disconnected") == 0, rc(d, "states")
        gateway.ok("POST", "/v1/rooms/tokens/messages", {"content": "still here"})
        wait_until(lambda: rc(d, "messages") == ["still here"], what="delivery on the refreshed connection")
        assert rc(d, "errors") == [], rc(d, "errors")
        assert page_problems(d) == [], page_problems(d)
        report(f"token refreshed through getToken ({rc(d, 'tokens')} tokens), connection outlived the {grace} s grace")
    finally:
        d.quit()


def test_readme_example_page(gateway, origin, report):
    d = browser()
    try:
        d.get(f"{origin.base}/example.html?gateway={urllib.parse.quote(gateway.base)}")
        # The page enters "lobby" itself; wait until the gateway counts it online.
        def online():
            rooms = gateway.ok("GET", "/v1/directory/rooms?prefix=lobby")["rooms"]
            return rooms and rooms[0]["onlineCount"] >= 1
        wait_until(online, what="the example page in the lobby")
        gateway.ok("POST", "/v1/rooms/lobby/messages", {"content": "hello example"})
        wait_until(lambda: "hello example" in d.execute_script(
            "return [...document.querySelectorAll('#messages li')].map(li => li.textContent).join('|')"), what="the example shows it")
        assert page_problems(d) == [], page_problems(d)
        report("the README example page shows a message sent through REST")
    finally:
        d.quit()
