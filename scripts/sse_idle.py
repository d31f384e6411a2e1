"""Holds N idle Server-Sent Events subscribers (TR-1) on a roomcast server, for scripts/bench-idle.sh.

Each subscriber is one user with its own client token (HS256, minted here with the app's secret, as
an app server mints them) and one `GET /sse?rooms=ROOM` that joined the room. Everything the server
sends is read and dropped, so the server's memory holds sessions, not unread output. Member events
are off for the app (as in the WebSocket idle run), so joins are not sent to every other member. Prints `sse-idle: open=N failed=F in S s` once all are open,
holds them, then closes them.

    python3 scripts/sse_idle.py PORT N APP_KEY APP_SECRET ROOM HOLD_SECONDS [PUBLISH]

With PUBLISH (a number of messages), once all are open the app server sends that many messages to
the room, one every 100 ms, and every subscriber's `room.message` events are counted until each has
them all or HOLD_SECONDS pass: `sse-fanout: subscribers=N published=M delivered=D/E complete=C`.
"""

import base64
import hashlib
import hmac
import json
import resource
import selectors
import socket
import sys
import time
import uuid
import urllib.request


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(app: str, secret: str, user: str) -> str:
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = b64url(json.dumps({"sub": user, "app": app, "exp": int(time.time()) + 3600}, separators=(",", ":")).encode())
    signature = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64url(signature)}"


def signed(port: int, app: str, secret: str, method: str, path: str, body: dict) -> None:
    nonce, ts = uuid.uuid4().hex, str(int(time.time()))
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", method=method, data=json.dumps(body).encode(),
        headers={"App-Key": app, "Nonce": nonce, "Timestamp": ts, "Content-Type": "application/json",
                 "Signature": hashlib.sha1((secret + nonce + ts).encode()).hexdigest()})
    urllib.request.urlopen(request, timeout=10).read()


def create_room(port: int, app: str, secret: str, room: str) -> None:
    # As the WebSocket idle run (roomcast-bench fanout): no member events, so each subscriber's
    # join is not sent to every other one (N² events while they connect).
    signed(port, app, secret, "PATCH", "/v1/settings", {"memberChangeEvents": False, "enterExitNotifications": False})
    try:
        signed(port, app, secret, "POST", "/v1/rooms", {"roomId": room, "enterExitNotifications": False})
    except urllib.error.HTTPError as e:
        if e.code != 409:  # already there
            raise


def main() -> None:
    port, n, app, secret, room, hold = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], float(sys.argv[6])
    publish = int(sys.argv[7]) if len(sys.argv) > 7 else 0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 256)), hard))
    create_room(port, app, secret, room)
    started = time.time()
    readers = selectors.DefaultSelector()
    held, failed, first_failure = [], 0, None

    def drain(timeout: float) -> None:
        for key, _ in readers.select(timeout):
            try:
                if not key.fileobj.recv(65536):
                    readers.unregister(key.fileobj)
            except BlockingIOError:
                pass
            except OSError:
                readers.unregister(key.fileobj)

    for i in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall((f"GET /sse?rooms={room} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
                       f"Authorization: Bearer {token(app, secret, f'idle-{i}')}\r\n\r\n").encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = s.recv(4096)
                if not chunk:
                    raise ConnectionError("closed before the response head")
                head += chunk
            if not head.startswith(b"HTTP/1.1 200"):
                raise ConnectionError(head.split(b"\r\n")[0].decode())
            s.setblocking(False)
            readers.register(s, selectors.EVENT_READ)
            held.append(s)
        except (OSError, ConnectionError) as e:
            failed += 1
            first_failure = first_failure or str(e)
        if i % 32 == 31:
            drain(0)
    print(f"sse-idle: open={len(held)} failed={failed} in {time.time() - started:.2f} s", flush=True)
    if first_failure:
        print(f"sse-idle: first failure: {first_failure}", flush=True)
    if publish:
        fanout(port, app, secret, room, held, publish, hold)
    else:
        until = time.time() + hold
        while time.time() < until:
            drain(0.1)
    for s in held:
        s.close()


MARK = b"event: room.message\n"


def fanout(port, app, secret, room, held, publish, hold):
    """Publishes `publish` messages and counts each subscriber's room.message events (a marker split
    across two reads is found through the tail kept from the first)."""
    counts = {s.fileno(): 0 for s in held}
    tails = {s.fileno(): b"" for s in held}
    closed = 0
    readers = selectors.DefaultSelector()
    for s in held:
        readers.register(s, selectors.EVENT_READ)

    def read(timeout):
        nonlocal closed
        for key, _ in readers.select(timeout):
            s = key.fileobj
            try:
                data = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                readers.unregister(s)
                closed += 1
                continue
            joined = tails[s.fileno()] + data
            counts[s.fileno()] += joined.count(MARK)
            tails[s.fileno()] = joined[-(len(MARK) - 1):]

    # What the joins sent is read first: only the messages are counted.
    read(0.5)
    for fd in counts:
        counts[fd] = 0
    started = time.time()
    sent = 0
    until = time.time() + hold
    while time.time() < until:
        if sent < publish and time.time() >= started + sent * 0.1:
            signed(port, app, secret, "POST", f"/v1/rooms/{room}/messages", {"content": f"fanout {sent}"})
            sent += 1
        read(0.05)
        if sent == publish and all(c >= publish for c in counts.values()):
            break
    delivered = sum(min(c, publish) for c in counts.values())
    expected = publish * len(held)
    complete = sum(1 for c in counts.values() if c == publish)
    extra = sum(max(0, c - publish) for c in counts.values())
    print(f"sse-fanout: subscribers={len(held)} published={sent} delivered={delivered}/{expected} complete={complete} "
          f"extra={extra} closed={closed} in {time.time() - started:.2f} s", flush=True)


if __name__ == "__main__":
    main()
