"""TR-3 in a real browser: the client library falls back WebSocket → SSE → long-poll and back
without losing or repeating an event. Pages on the app's origin reach roomcast through our own
proxy (browser_proxy.py, 127.0.0.1 only) that refuses WebSocket upgrades, breaks event streams or
cuts streams mid-event; a REST publisher sends numbered messages straight to roomcast, and every
check asserts the exact sequence the page delivered (no gap, no duplicate, offsets rising).

- refused upgrades: the page falls back to SSE and gets everything, its commands answered over
  POST /client/ops; once upgrades go through again it moves back to the WebSocket while messages
  keep coming, again with every message once;
- cuts: WebSocket connections, then SSE streams, are cut mid-event three times each; the page
  resumes across every cut with every message once;
- a short-lived token is refreshed over SSE (token.refresh posted with the new token);
- refused upgrades and broken event streams: the page ends on long-polling and gets everything;
- the console (which uses the client library) shows live events with upgrades refused.

Run by scripts/browser_tests.py; about half a minute in all (browsers included)."""

import threading
import time

from browser_harness import browser, page_problems, wait_until
from browser_proxy import FallbackProxy

# A page: the library from the gateway (through the proxy), short backoffs so the checks stay quick.
SETUP = """
const [proxy, user, room, ttl, done] = arguments;
(async () => {
  const { RoomcastClient } = await import(proxy + "/client/roomcast.js");
  const rc = window.rc = { messages: [], offsets: [], transports: [], states: [], errors: [], tokens: 0 };
  rc.client = new RoomcastClient(proxy.replace(/^http/, "ws") + "/ws", {
    getToken: async () => { rc.tokens += 1; return (await fetch(`/token?user=${user}&ttl=${ttl}`)).text(); },
    backoff: { initialMs: 200, maxMs: 1000, factor: 2, jitter: 0 },
    fallback: { handshakeTimeoutMs: 3000, probe: { initialMs: 400, maxMs: 800, factor: 2, jitter: 0 } },
  });
  rc.client.on("room.message", (e) => { rc.messages.push(e.data.message.content); rc.offsets.push(e.offset); });
  rc.client.on("transport", (t) => rc.transports.push(t.transport));
  rc.client.on("state", (s) => rc.states.push(s.state));
  rc.client.on("error", (e) => rc.errors.push(`${e.type}: ${e.error && (e.error.code + " " + e.error.message)}`));
  await rc.client.connect();
  await rc.client.join(room, { mode: "enter" });
  return "ok";
})().then(done, (e) => done("failed: " + (e && (e.stack || e.message || e.code))));
"""

SEND = """
const [room, text, done] = arguments;
window.rc.client.sendMessage(room, text).then((ok) => done(ok && ok.message ? "sent" : JSON.stringify(ok)),
  (e) => done("refused: " + (e && (e.code + " " + e.message))));
"""

# What Chromium logs about the requests the proxy refuses (upgrades) or cuts (event streams): expected here.
EXPECTED_PROBLEMS = ("WebSocket connection to", "net::ERR_INCOMPLETE_CHUNKED_ENCODING")


def rc(driver, expr):
    return driver.execute_script("return window.rc." + expr)


def open_page(driver, origin, proxy, user, room, ttl=3600):
    driver.get(origin.base + "/app.html")
    result = driver.execute_async_script(SETUP, proxy.base, user, room, ttl)
    assert result == "ok", f"{user}: {result}"


def publish(gateway, room, contents, interval=0.0):
    for c in contents:
        gateway.ok("POST", f"/v1/rooms/{room}/messages", {"content": c})
        if interval:
            time.sleep(interval)


def publishing(gateway, room, contents, interval):
    """Publishes in the background; returns the thread (join it)."""
    t = threading.Thread(target=publish, args=(gateway, room, contents, interval), daemon=True)
    t.start()
    return t


def exactly_once(driver, expected, what, timeout=15):
    """Waits until the page delivered `expected`, then checks it delivered exactly that, in order,
    with rising offsets (no gap, no duplicate)."""
    wait_until(lambda: len(rc(driver, "messages")) >= len(expected), timeout=timeout,
               what=f"{what}: {len(expected)} messages (got {rc(driver, 'messages')})")
    time.sleep(0.3)  # anything extra (a duplicate) would arrive now
    messages, offsets = rc(driver, "messages"), rc(driver, "offsets")
    assert messages == expected, f"{what}: {messages} != {expected}"
    assert offsets == sorted(set(offsets)), f"{what}: offsets {offsets}"


def test_sse_and_back(gateway, origin, proxy, report):
    room = "tr3-sse"
    gateway.ok("POST", "/v1/rooms", {"roomId": room, "keepAlive": True})
    proxy.set("refuse-ws")
    d = browser()
    try:
        open_page(d, origin, proxy, "tr3-sam", room)
        assert rc(d, "client.transport") == "sse", rc(d, "client.transport")
        assert proxy.refused_upgrades >= 1
        first = [f"sse {i}" for i in range(10)]
        publish(gateway, room, first)
        exactly_once(d, first, "on SSE")
        assert d.execute_async_script(SEND, room, "from the page over SSE") == "sent"
        report("TR-3: WebSocket upgrade refused: the page fell back to SSE, got 10 messages once each, "
               "and its send was answered over POST /client/ops")

        # Upgrades go through again while messages keep coming: the page moves back.
        second = [f"back {i}" for i in range(20)]
        thread = publishing(gateway, room, second, 0.05)
        time.sleep(0.2)
        proxy.set("pass")
        wait_until(lambda: rc(d, "client.transport") == "websocket", timeout=10, what="the move back to the WebSocket")
        thread.join()
        exactly_once(d, first + second, "across the move back")
        assert rc(d, "transports") == ["sse", "websocket"], rc(d, "transports")
        assert "disconnected" not in rc(d, "states")[rc(d, "states").index("connected"):], rc(d, "states")
        assert rc(d, "errors") == [], rc(d, "errors")
        problems = page_problems(d, allow=EXPECTED_PROBLEMS)
        assert problems == [], problems
        report("TR-3: upgrades allowed again: the page moved back to the WebSocket while 20 messages came, each once, in order")
    finally:
        d.quit()


def test_token_refresh_on_sse(gateway, origin, proxy, report, grace):
    room = "tr3-tokens"
    gateway.ok("POST", "/v1/rooms", {"roomId": room, "keepAlive": True})
    proxy.set("refuse-ws")
    d = browser()
    try:
        open_page(d, origin, proxy, "tr3-tom", room, ttl=2)
        assert rc(d, "client.transport") == "sse"
        # The token expires after ~2 s; unless token.refresh (posted with the new token) is
        # accepted, the server ends the stream with 4002 after the grace.
        time.sleep(2 + grace + 1)
        states = rc(d, "states")
        assert "disconnected" not in states[states.index("connected"):], states
        assert rc(d, "tokens") >= 2, rc(d, "tokens")
        publish(gateway, room, ["after the refresh"])
        exactly_once(d, ["after the refresh"], "on the refreshed SSE session")
        assert rc(d, "transports") == ["sse"], rc(d, "transports")
        assert rc(d, "errors") == [], rc(d, "errors")
        report(f"TR-3: token refreshed over SSE ({rc(d, 'tokens')} tokens); the stream outlived the {grace} s grace")
    finally:
        proxy.set("pass")
        d.quit()


def test_cuts(gateway, origin, proxy, report):
    room = "tr3-cuts"
    gateway.ok("POST", "/v1/rooms", {"roomId": room, "keepAlive": True})
    proxy.set("pass")
    d = browser()
    try:
        open_page(d, origin, proxy, "tr3-cat", room)
        assert rc(d, "client.transport") == "websocket"
        proxy.set("pass", cuts=3)
        on_ws = [f"ws {i}" for i in range(30)]
        publishing(gateway, room, on_ws, 0.03).join()
        exactly_once(d, on_ws, "across WebSocket cuts")
        assert proxy.cuts == 3, f"{proxy.cuts} cuts"
        assert rc(d, "transports") == ["websocket"], rc(d, "transports")
        report("TR-3: WebSocket cut inside a frame 3 times: the page resumed and got 30 messages once each")

        # Now upgrades are refused and event streams are cut: SSE, resumed across every cut.
        proxy.set("refuse-ws", cuts=3)
        proxy.drop_streams()
        wait_until(lambda: rc(d, "client.transport") == "sse", timeout=10, what="the fall back to SSE")
        on_sse = [f"sse {i}" for i in range(30)]
        publishing(gateway, room, on_sse, 0.03).join()
        exactly_once(d, on_ws + on_sse, "across SSE cuts")
        assert proxy.cuts == 6, f"{proxy.cuts} cuts"
        kinds = [kind for kind, _, _ in proxy.cut_log]
        assert kinds == ["websocket"] * 3 + ["event-stream"] * 3, kinds
        assert all(inside and not tail.endswith(b"\n") for _, tail, inside in proxy.cut_log), proxy.cut_log
        assert rc(d, "errors") == [], rc(d, "errors")
        problems = page_problems(d, allow=EXPECTED_PROBLEMS)
        assert problems == [], problems
        report("TR-3: event stream cut inside an event 3 times: the page resumed and got 30 messages once each")
    finally:
        proxy.set("pass")
        d.quit()


def test_long_poll(gateway, origin, proxy, report):
    room = "tr3-poll"
    gateway.ok("POST", "/v1/rooms", {"roomId": room, "keepAlive": True})
    proxy.set("no-sse")
    d = browser()
    try:
        open_page(d, origin, proxy, "tr3-pat", room)
        assert rc(d, "client.transport") == "poll", rc(d, "client.transport")
        assert proxy.broken_streams >= 2, proxy.broken_streams
        messages = [f"poll {i}" for i in range(15)]
        publishing(gateway, room, messages, 0.02).join()
        exactly_once(d, messages, "on long-poll")
        assert d.execute_async_script(SEND, room, "from the page over long-poll") == "sent"
        assert rc(d, "transports") == ["poll"], rc(d, "transports")
        assert rc(d, "errors") == [], rc(d, "errors")
        problems = page_problems(d, allow=EXPECTED_PROBLEMS)
        assert problems == [], problems
        report(f"TR-3: upgrades refused and event streams broken ({proxy.broken_streams}): the page ended on long-poll "
               "and got 15 messages once each")
    finally:
        proxy.set("pass")
        d.quit()


def test_console_without_websocket(gateway, proxy, report):
    """The console uses the client library: through the refusing proxy its live stream runs on SSE."""
    import browser_console  # the console checks' helpers (sign-in, clicks)

    room = "tr3-console"
    gateway.ok("POST", "/v1/rooms", {"roomId": room, "name": "TR-3 console", "keepAlive": True})
    proxy.set("refuse-ws")
    refused_before = proxy.refused_upgrades

    class ThroughProxy:
        base, key, secret = proxy.base, gateway.key, gateway.secret

    console = browser()
    try:
        browser_console.sign_in(console, ThroughProxy)
        prefix = console.find_element("id", "rooms-prefix")
        prefix.clear()
        prefix.send_keys("tr3-console")
        console.find_element("id", "rooms-search").click()
        browser_console.click(console, f'tr[data-room-id="{room}"]')
        wait_until(lambda: console.find_element("id", "events-state").get_attribute("data-observing") == "true",
                   what="the console observing the room without a WebSocket")
        gateway.ok("POST", f"/v1/rooms/{room}/messages", {"content": "live without websockets"})
        wait_until(lambda: "live without websockets" in (browser_console.text_of(console, 'li[data-ev="room.message"]') or ""),
                   timeout=5, what="the live event in the console")
        assert proxy.refused_upgrades > refused_before, "the console's WebSocket went through the proxy and was refused"
        problems = page_problems(console, allow=EXPECTED_PROBLEMS)
        assert problems == [], problems
        report("TR-3: the console, its WebSocket refused, observes a room over SSE and shows a live event")
    finally:
        proxy.set("pass")
        console.quit()


def run_all(gateway, origin, report, grace):
    proxy = FallbackProxy(gateway.port).start()
    try:
        test_sse_and_back(gateway, origin, proxy, report)
        test_token_refresh_on_sse(gateway, origin, proxy, report, grace)
        test_cuts(gateway, origin, proxy, report)
        test_long_poll(gateway, origin, proxy, report)
        test_console_without_websocket(gateway, proxy, report)
    finally:
        proxy.stop()
