"""TR-3: a small HTTP proxy in front of roomcast for the browser checks (browser_transport.py), so
a real browser meets what breaks WebSockets in the field. Standard library only (asyncio), on
127.0.0.1 only, started and stopped by the test (its thread is a daemon, every connection is
closed on stop).

Modes (switchable while it runs):
- "pass": forwards everything (WebSocket upgrades included);
- "refuse-ws": answers every WebSocket upgrade with 403 and forwards plain HTTP, streaming
  responses included;
- "no-sse": as refuse-ws, and also breaks every text/event-stream response (the header goes
  through, then the connection closes before any event, as a buffering proxy that gives up);
- with `cuts` > 0 (any mode): streaming responses (event streams, and WebSockets when they are
  allowed) are cut mid-event that many times: once `cut_after` bytes and a whole message went
  through on a connection, the next piece from the server carrying a message is forwarded only up to a point inside an event's
  data line, or inside a WebSocket frame, and the connection is closed (`cut_log` says where).

Each request gets its own connection to roomcast (`Connection: close` both ways), so every
request is seen and judged here."""

import asyncio
import threading

HEAD_LIMIT = 64 * 1024


def _split_head(raw):
    lines = raw.decode("latin-1").split("\r\n")
    return lines[0], [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:] if ":" in line]


def _join_head(first, headers):
    return ("\r\n".join([first] + [f"{k}: {v}" for k, v in headers]) + "\r\n\r\n").encode("latin-1")


class _Frames:
    """Where the server's WebSocket frames begin and end in what it sends (its frames are not
    masked), so that a cut lands inside a frame."""

    def __init__(self):
        self.left = 0  # bytes of the current frame still to come
        self.head = b""  # the start of a header the previous piece cut short

    @staticmethod
    def _sizes(head):
        """(header size, payload size) once `head` holds enough of a header, else None."""
        if len(head) < 2:
            return None
        n = head[1] & 0x7F
        extra = 2 if n == 126 else 8 if n == 127 else 0
        size = 2 + extra + (4 if head[1] & 0x80 else 0)
        if len(head) < size:
            return size, None
        payload = int.from_bytes(head[2:2 + extra], "big") if extra else n
        return size, payload

    def boundaries(self, data):
        """The offsets in `data` where a frame begins or ends; takes `data` in."""
        out, i = set(), 0
        while i < len(data):
            if self.left:
                step = min(self.left, len(data) - i)
                self.left -= step
                i += step
                if self.left == 0:
                    out.add(i)
                continue
            if not self.head:
                out.add(i)
            self.head += data[i:i + 1]
            i += 1
            sizes = self._sizes(self.head)
            if sizes and sizes[1] is not None:
                self.head = b""
                self.left = sizes[1]
                if self.left == 0:
                    out.add(i)
        return out


def _closing(headers):
    """The headers with Connection: close instead of any keep-alive."""
    kept = [(k, v) for k, v in headers if k.lower() not in ("connection", "keep-alive", "proxy-connection")]
    return kept + [("Connection", "close")]


class FallbackProxy:
    def __init__(self, upstream_port, cut_after=600):
        self.upstream_port = upstream_port
        self.cut_after = cut_after
        self.mode = "pass"
        self.cuts_left = 0
        # What it did, for the tests' assertions.
        self.refused_upgrades = 0
        self.upgrades = 0
        self.broken_streams = 0
        self.cuts = 0
        # Each cut: the stream's kind ("websocket", "event-stream") and the last bytes it delivered
        # (an event stream's never end an event; a WebSocket's never end a frame).
        self.cut_log = []
        self.port = None
        self._loop = None
        self._server = None
        self._thread = None
        self._writers = set()
        self._lock = threading.Lock()

    @property
    def base(self):
        return f"http://127.0.0.1:{self.port}"

    def set(self, mode, cuts=0):
        """Switches the mode (new connections see it; open ones keep flowing)."""
        assert mode in ("pass", "refuse-ws", "no-sse"), mode
        with self._lock:
            self.mode = mode
            self.cuts_left = cuts

    def start(self):
        ready = threading.Event()

        def run():
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0, limit=HEAD_LIMIT))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fallback-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the proxy did not start")
        return self

    def stop(self):
        if not self._loop:
            return

        async def shutdown():
            self._server.close()
            for w in list(self._writers):
                w.close()
            await asyncio.sleep(0)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop = None

    def drop_streams(self):
        """Closes every open connection at once (the next ones see the current mode)."""
        async def drop():
            for w in list(self._writers):
                w.close()

        asyncio.run_coroutine_threadsafe(drop(), self._loop).result(5)

    def _take_cut(self):
        with self._lock:
            if self.cuts_left <= 0:
                return False
            self.cuts_left -= 1
            self.cuts += 1
            return True

    @staticmethod
    def _cut_point(data, bounds, websocket):
        """Where to cut this piece so that what gets through ends inside an event: about half
        way and not at a frame's edge (WebSocket), or a few bytes into an event's data line
        (an event stream; its chunked framing around it stays whole up to there). None: not in
        this piece."""
        if websocket:
            cut = len(data) // 2
            while cut < len(data) - 1 and cut in bounds:
                cut += 1
            return cut if 0 < cut < len(data) and cut not in bounds else None
        at = data.find(b"\ndata: ")
        return at + 9 if at >= 0 and at + 9 < len(data) else None

    async def _handle(self, reader, writer):
        self._writers.add(writer)
        upstream_writer = None
        try:
            try:
                raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ConnectionError):
                return
            first, headers = _split_head(raw[:-4])
            upgrade = any(k.lower() == "upgrade" and "websocket" in v.lower() for k, v in headers)
            with self._lock:
                mode = self.mode
            if upgrade:
                self.upgrades += 1
                if mode != "pass":
                    self.refused_upgrades += 1
                    writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 18\r\nConnection: close\r\n\r\nno websockets here")
                    await writer.drain()
                    return
            else:
                headers = _closing(headers)
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port, limit=HEAD_LIMIT)
            self._writers.add(upstream_writer)
            upstream_writer.write(_join_head(first, headers))
            await upstream_writer.drain()
            to_server = asyncio.ensure_future(self._pipe(reader, upstream_writer))
            try:
                await self._respond(upstream_reader, writer, upgrade, mode)
            finally:
                to_server.cancel()
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        finally:
            for w in (writer, upstream_writer):
                if w is not None:
                    self._writers.discard(w)
                    w.close()

    async def _pipe(self, reader, writer):
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass

    async def _respond(self, upstream, writer, upgrade, mode):
        raw = await upstream.readuntil(b"\r\n\r\n")
        first, headers = _split_head(raw[:-4])
        streaming = upgrade and first.split(" ")[1:2] == ["101"]
        event_stream = any(k.lower() == "content-type" and v.lower().startswith("text/event-stream") for k, v in headers)
        if not upgrade:
            headers = _closing(headers)
        writer.write(_join_head(first, headers))
        await writer.drain()
        if event_stream and mode == "no-sse":
            self.broken_streams += 1
            return
        frames = _Frames() if streaming else None
        streaming = streaming or event_stream
        forwarded = 0
        # Messages that went through on this connection whole: a cut comes only after one, and
        # in a piece that carries another, so every cut session delivered something first (a
        # session cut before its first event counts towards the client's fallback, which the
        # cut checks do not mean to test) and every cut loses part of a message.
        delivered = 0
        while True:
            data = await upstream.read(65536)
            if not data:
                return
            messages = data.count(b"room.message") + data.count(b'"m":')
            bounds = frames.boundaries(data) if frames else set()
            ready = streaming and forwarded >= self.cut_after and delivered > 0 and messages > 0
            cut = self._cut_point(data, bounds, frames is not None) if ready else None
            if cut is not None and self._take_cut():
                writer.write(data[:cut])
                self.cut_log.append(("websocket" if frames else "event-stream", data[:cut][-16:], cut not in bounds))
                await writer.drain()
                return
            writer.write(data)
            await writer.drain()
            forwarded += len(data)
            delivered += messages
