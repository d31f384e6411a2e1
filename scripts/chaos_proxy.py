"""A TCP proxy between each roomcast node and PostgreSQL, for scripts/chaos-cluster.sh.

This machine's kernel has no netem qdisc, so delay, loss and half-open connections are made
here, in user space, per node:

    python3 chaos_proxy.py CONTROL_SOCKET UPSTREAM_HOST:PORT NAME=LISTEN_HOST:PORT ...

Each NAME (a node) gets its own listening address; every connection accepted there is joined to
UPSTREAM. The control socket (a Unix stream socket, so it reaches across network namespaces)
takes one JSON object per line and answers "ok" (or "error ...") on a line:

    {"name": "n1", "mode": "pass"}                       forward as is (also: heal)
    {"name": "n1", "mode": "delay", "ms": 300}           every chunk waits this long, order kept
    {"name": "n1", "mode": "loss", "p": 0.2, "seed": 7}  a TCP proxy cannot drop bytes and keep
        the stream; a lost segment is what TCP retransmits, so each chunk is held, with
        probability p, for a retransmission timeout (200-1000 ms), and with probability p/20
        the connection is reset (what a peer does once retransmissions are exhausted)
    {"name": "n1", "mode": "halfopen"}                   nothing passes either way and nothing is
        closed: both ends see a silent connection (new connections are accepted and go silent too);
        what either sent meanwhile is lost, so on the next mode change those connections are reset
        (RST), as a peer that comes back answers a stale connection

Randomness comes from the seed given with the mode (the harness derives it from its own seed).
The proxy prints one line per mode change and exits on SIGTERM or when its control socket is
removed.
"""
import asyncio
import json
import os
import random
import signal
import socket
import struct
import sys


class Link:
    """One node's listening address, its mode and its open connections."""

    def __init__(self, name):
        self.name = name
        self.mode = "pass"
        self.ms = 0
        self.p = 0.0
        self.rng = random.Random(0)
        self.conns = set()   # (client writer, upstream writer)
        self.silenced = set()

    def set(self, command):
        old = self.mode
        self.mode = command["mode"]
        self.ms = int(command.get("ms", 0))
        self.p = float(command.get("p", 0.0))
        self.rng = random.Random(int(command.get("seed", 0)))
        if old == "halfopen" and self.mode != "halfopen":
            for pair in list(self.silenced):
                for w in pair:
                    reset(w)
            self.silenced.clear()
        if self.mode == "halfopen":
            self.silenced |= self.conns


def reset(writer):
    """Closes with RST (SO_LINGER 0), as a peer that has forgotten the connection."""
    try:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
    except Exception:
        pass


async def pump(link, pair, reader, writer):
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def sender():
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if pair in link.silenced:
                continue
            writer.write(data)
            await writer.drain()
        try:
            writer.write_eof()
        except Exception:
            pass

    task = asyncio.create_task(sender())
    last_due = 0.0
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            if pair in link.silenced:
                continue   # half-open: what was sent is lost
            due = loop.time()
            if link.mode == "delay":
                due += link.ms / 1000
            elif link.mode == "loss" and link.rng.random() < link.p:
                if link.rng.random() < 0.05:
                    for w in pair:
                        reset(w)
                    break
                due += link.rng.uniform(0.2, 1.0)
            due = max(due, last_due)   # bytes keep their order
            last_due = due
            queue.put_nowait((due, data))
    except (ConnectionError, OSError):
        pass
    finally:
        queue.put_nowait((0, None))
        try:
            await task
        except (ConnectionError, OSError):
            for w in pair:
                reset(w)


async def serve_link(link, listen, upstream):
    async def handle(creader, cwriter):
        try:
            ureader, uwriter = await asyncio.open_connection(*upstream)
        except OSError:
            reset(cwriter)
            return
        pair = (cwriter, uwriter)
        link.conns.add(pair)
        if link.mode == "halfopen":
            link.silenced.add(pair)
        try:
            await asyncio.gather(pump(link, pair, creader, uwriter), pump(link, pair, ureader, cwriter))
        finally:
            link.conns.discard(pair)
            link.silenced.discard(pair)
            for w in pair:
                w.close()

    host, port = listen
    return await asyncio.start_server(handle, host, port, reuse_address=True)


async def main():
    control, upstream = sys.argv[1], sys.argv[2].rsplit(":", 1)
    upstream = (upstream[0], int(upstream[1]))
    links, servers = {}, []
    for spec in sys.argv[3:]:
        name, addr = spec.split("=", 1)
        host, port = addr.rsplit(":", 1)
        links[name] = Link(name)
        servers.append(await serve_link(links[name], (host, int(port)), upstream))

    async def control_client(reader, writer):
        while line := await reader.readline():
            try:
                command = json.loads(line)
                links[command["name"]].set(command)
                print(f"chaos-proxy: {command['name']} -> {json.dumps({k: v for k, v in command.items() if k != 'name'})}", flush=True)
                writer.write(b"ok\n")
            except Exception as e:   # a bad command is answered, never fatal
                writer.write(f"error {e}\n".encode())
            await writer.drain()
        writer.close()

    if os.path.exists(control):
        os.unlink(control)
    control_server = await asyncio.start_unix_server(control_client, control)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    print(f"chaos-proxy: {', '.join(sys.argv[3:])} -> {sys.argv[2]}", flush=True)
    while not stop.is_set() and os.path.exists(control):
        try:
            await asyncio.wait_for(stop.wait(), 1)
        except asyncio.TimeoutError:
            pass
    control_server.close()
    for s in servers:
        s.close()


if __name__ == "__main__":
    asyncio.run(main())
