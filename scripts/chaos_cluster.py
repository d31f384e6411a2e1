"""The fault-injection run behind scripts/chaos-cluster.sh (CL-7, CL-8): one seed.

Runs inside the clients' network namespace that chaos-cluster.sh made (the workload, the app
servers' webhook receiver and this driver live there) and starts PostgreSQL, the TCP proxy and
three roomcast nodes in their own namespaces with `ip netns exec`. Everything it starts it keeps
by pid and stops by pid; it talks only to the addresses chaos-cluster.sh made.

    python3 chaos_cluster.py --seed N --work DIR --bin ROOMCAST --net 10.213.7 --ns PREFIX [...]

Phases: start; a fault phase of --fault-seconds during which writers, clients and the webhook
receiver run while the seeded schedule injects faults; heal (every fault undone, every process
running); settle (every node at the log's head, every client at every room's last offset, every
acknowledged message's webhook received, all bounded); digest (each node's rooms read back); then
the history (DIR/history.jsonl) goes to chaos_check.py. Exit status: the checker's.
"""
import argparse
import base64
import hashlib
import http.client
import http.server
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

APP, SECRET = "chaos", "chaos-secret-0123456789"
ROOMS = ["r0", "r1", "r2"]
NODES = ["n1", "n2", "n3"]
USERS = [f"u{i}" for i in range(1, 7)]

args = None
stop_work = threading.Event()   # writers stop taking new writes
stop_all = threading.Event()    # everything stops
started = time.monotonic()


def now():
    return round(time.monotonic() - started, 3)


def log(*a):
    print(f"[{now():7.2f}] chaos:", *a, flush=True)


# --- The recorded history ------------------------------------------------------------------
class History:
    def __init__(self, path):
        self.f = open(path, "w")
        self.lock = threading.Lock()

    def add(self, record, /, **fields):
        fields["k"], fields["t"] = record, now()
        line = json.dumps(fields, sort_keys=True)
        with self.lock:
            self.f.write(line + "\n")
            self.f.flush()

    def flush(self):
        with self.lock:
            self.f.flush()

    def close(self):
        with self.lock:
            self.f.flush()
            self.f.close()


history = None


# --- Addresses -----------------------------------------------------------------------------
def addr(name):
    return {"pg": f"{args.net}.1", "n1": f"{args.net}.11", "n2": f"{args.net}.12", "n3": f"{args.net}.13",
            "cl": f"{args.net}.100"}[name]


def ns(name):
    return f"{args.ns}-{name}"


def in_ns(name, argv):
    return ["ip", "netns", "exec", ns(name)] + argv


NODE_PORT = 8080
HOOK_PORT = 9000


# --- Processes: started and stopped by pid only --------------------------------------------
class Proc:
    def __init__(self, name, argv, logfile, env=None):
        self.name, self.argv, self.logfile, self.env = name, argv, logfile, env
        self.p = None

    def start(self):
        out = open(self.logfile, "a")
        out.write(f"--- start at {now()} ---\n")
        out.flush()
        self.p = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        out.close()
        with open(os.path.join(args.work, "pids"), "a") as f:
            f.write(f"{self.p.pid}\n")

    def alive(self):
        return self.p is not None and self.p.poll() is None

    def signal(self, sig):
        if self.alive():
            try:
                os.kill(self.p.pid, sig)
            except ProcessLookupError:
                pass

    def wait(self, timeout):
        if self.p is None:
            return None
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout=10):
        if not self.alive():
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        if self.wait(timeout) is None:
            self.signal(signal.SIGKILL)
            self.wait(5)


# --- PostgreSQL ----------------------------------------------------------------------------
class Postgres:
    def __init__(self):
        self.dir = os.path.join(args.work, "pg")
        self.proc = None

    def init(self):
        os.makedirs(self.dir, exist_ok=True)
        subprocess.run(["chown", "-R", "postgres", self.dir], check=True)
        subprocess.run(["runuser", "-u", "postgres", "--", f"{args.pg_bin}/initdb", "-D", f"{self.dir}/data", "-A", "trust",
                        "-U", "roomcast", "--no-sync", "-E", "UTF8", "--locale=C"], check=True, stdout=subprocess.DEVNULL)
        self.start()
        self.psql("postgres", "CREATE DATABASE roomcast")

    def start(self):
        # setpriv execs postgres itself, so the pid is the postmaster's (kill -9 hits it).
        argv = in_ns("pg", ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", f"{args.pg_bin}/postgres",
                            "-D", f"{self.dir}/data", "-p", "5432", "-k", self.dir, "-c", "listen_addresses=127.0.0.1",
                            "-c", "fsync=on", "-c", "synchronous_commit=on"])
        for attempt in range(40):
            self.proc = Proc("postgres", argv, os.path.join(args.work, "pg.log"))
            self.proc.start()
            if self.ready(10):
                return
            self.proc.signal(signal.SIGKILL)
            self.proc.wait(5)
            time.sleep(0.5)   # a killed postmaster's backends may still hold its shared memory
        raise RuntimeError("PostgreSQL did not start")

    def ready(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not self.proc.alive():
                return False
            r = subprocess.run(in_ns("pg", [f"{args.pg_bin}/pg_isready", "-h", "127.0.0.1", "-p", "5432", "-U", "roomcast", "-q"]))
            if r.returncode == 0:
                return True
            time.sleep(0.2)
        return False

    def psql(self, db, sql):
        r = subprocess.run(in_ns("pg", ["psql", "-h", "127.0.0.1", "-p", "5432", "-U", "roomcast", "-d", db, "-qAt", "-c", sql]),
                           capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            raise RuntimeError(r.stderr.strip())
        return r.stdout.strip()

    def stop(self):
        if self.proc:
            self.proc.signal(signal.SIGINT)   # fast shutdown
            if self.proc.wait(20) is None:
                self.proc.signal(signal.SIGKILL)
                self.proc.wait(5)


# --- The proxy -----------------------------------------------------------------------------
class Proxy:
    def __init__(self):
        self.control = os.path.join(args.work, "proxy.sock")
        specs = [f"{n}={addr('pg')}:{6400 + i + 1}" for i, n in enumerate(NODES)]
        self.proc = Proc("proxy", in_ns("pg", [sys.executable, os.path.join(os.path.dirname(__file__), "chaos_proxy.py"),
                                                self.control, "127.0.0.1:5432"] + specs), os.path.join(args.work, "proxy.log"))

    def start(self):
        self.proc.start()
        for _ in range(100):
            if os.path.exists(self.control):
                return
            time.sleep(0.05)
        raise RuntimeError("proxy did not start")

    def set(self, **command):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(5)
        s.connect(self.control)
        s.sendall((json.dumps(command) + "\n").encode())
        answer = s.makefile().readline().strip()
        s.close()
        if answer != "ok":
            raise RuntimeError(f"proxy: {answer}")

    def port(self, node):
        return 6400 + NODES.index(node) + 1


# --- Nodes ---------------------------------------------------------------------------------
class Node:
    def __init__(self, name, proxy, clock_offset_ms):
        self.name = name
        self.down = False         # the schedule holds it down (killed, not yet restarted)
        self.stopped = False      # SIGSTOPped
        self.runs = 0
        self.clock_offset_ms = clock_offset_ms
        data = os.path.join(args.work, f"data-{name}")
        os.makedirs(data, exist_ok=True)
        url = (f"postgres://roomcast@{addr('pg')}:{proxy.port(name)}/roomcast?connect_timeout=3"
               "&keepalives=1&keepalives_idle=5&keepalives_interval=2&keepalives_count=2&tcp_user_timeout=10000")
        hook = f"{APP} http://{addr('cl')}:{HOOK_PORT}/hook allow-private"
        self.argv = in_ns(name, [args.bin, "--host", addr(name), "--port", str(NODE_PORT), "--event-loops", "1",
                                 "--data-dir", data, "--cluster", url, "--node-id", name, "--app", f"{APP}:{SECRET}",
                                 "--public-url", f"ws://{addr(name)}:{NODE_PORT}/ws", "--node-timeout", str(args.node_timeout),
                                 "--ping-interval", "2", "--pong-timeout", "3", "--presence-grace", "1",
                                 "--connects-per-ip", "1000", "--webhook", hook, "--webhook-allow-private", APP,
                                 "--webhook-retry-schedule", "1s,1s,2s,2s,3s,3s,5s,5s,5s,5s,5s,5s,5s,5s,5s,5s",
                                 "--webhook-timeout", "3", "--snapshot-every", "300", "--snapshot-interval", "5",
                                 "--log-level", "notice", f"--clock-offset-ms={clock_offset_ms}"])
        env = dict(os.environ, SWIFT_BACKTRACE="enable=no")
        self.proc = Proc(name, self.argv, os.path.join(args.work, f"{name}.log"), env)
        self.lock = threading.Lock()

    def start(self):
        with self.lock:
            self.runs += 1
            self.down = False
            self.stopped = False
            self.proc.start()
            run, pid = self.runs, self.proc.p.pid
        history.add("node-start", node=self.name, run=run, pid=pid)
        threading.Thread(target=self.record_ready, args=(run, pid), daemon=True).start()

    def record_ready(self, run, pid):
        """Records what a run started from once it is ready (CL-9: its own replica after a clean
        stop, else the newest snapshot or the log), for the summary."""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not stop_all.is_set():
            with self.lock:
                if self.proc.p is None or self.proc.p.pid != pid or self.proc.p.poll() is not None:
                    return
            status, body = self.readyz(1)
            if status == 200:
                cluster = body.get("cluster", {})
                history.add("node-ready", node=self.name, run=run, start=cluster.get("start"), position=cluster.get("startPosition"))
                return
            stop_all.wait(0.2)

    def readyz(self, timeout=2):
        try:
            c = http.client.HTTPConnection(addr(self.name), NODE_PORT, timeout=timeout)
            c.request("GET", "/readyz")
            r = c.getresponse()
            body = r.read()
            c.close()
            return r.status, json.loads(body or b"{}")
        except (OSError, ValueError, http.client.HTTPException):
            return 0, {}


def supervise(nodes):
    """Restarts a node that exited when the schedule does not hold it down (a node the cluster
    declared dead exits 75 to rejoin as a new run, as its service manager would restart it)."""
    while not stop_all.is_set():
        for n in nodes.values():
            with n.lock:
                exited = n.proc.p is not None and n.proc.p.poll() is not None and not n.down
                code = n.proc.p.returncode if exited else None
            if exited:
                history.add("node-exit", node=n.name, code=code)
                log(f"{n.name} exited with {code}; restarting")
                n.start()
        stop_all.wait(0.5)


# --- HTTP client: signed REST calls --------------------------------------------------------
class Signer:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.lock = threading.Lock()

    def headers(self):
        with self.lock:
            nonce = f"{self.rng.getrandbits(64):016x}"
        ts = str(int(time.time()))
        return {"App-Key": APP, "Nonce": nonce, "Timestamp": ts,
                "Signature": hashlib.sha1((SECRET + nonce + ts).encode()).hexdigest(), "Content-Type": "application/json"}


signer = None


def call(node, method, path, body=None, key=None, timeout=8):
    """One signed call; (status, json) or (0, {"error": ...}) when no answer came."""
    h = signer.headers()
    if key:
        h["Idempotency-Key"] = key
    try:
        c = http.client.HTTPConnection(addr(node), NODE_PORT, timeout=timeout)
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        try:
            j = json.loads(data or b"{}")
        except ValueError:
            j = {"raw": data.decode(errors="replace")[:200]}
        if r.getheader("Idempotent-Replayed"):
            j["_replayed"] = True
        return r.status, j
    except (OSError, http.client.HTTPException) as e:
        return 0, {"error": type(e).__name__}


def error_code(j):
    """A REST refusal's code ({"code", "message", "field"})."""
    return j.get("code") if isinstance(j, dict) and isinstance(j.get("code"), int) else None


# --- Writers -------------------------------------------------------------------------------
def writer(home, seed, counts):
    """Sends messages through its home node with an Idempotency-Key each; an unanswered or
    'try again' attempt is retried with the same key, on the next node after a few tries."""
    rng = random.Random(seed)
    seq = 0
    while not stop_work.is_set():
        seq += 1
        wid = f"w-{home}-{seq}"
        room = rng.choice(ROOMS)
        history.add("write", id=wid, room=room)
        order = [home] + [n for n in NODES if n != home]
        attempt = 0
        outcome = None
        give_up = None
        while not stop_all.is_set():
            node = order[(attempt // 3) % len(order)]
            attempt += 1
            status, j = call(node, "POST", f"/v1/rooms/{room}/messages", {"content": wid, "fromUserId": f"app-{home}"}, key=wid)
            code = error_code(j)
            history.add("attempt", id=wid, node=node, status=status, code=code, replayed=bool(j.get("_replayed")))
            if args.broken == "ack-on-send" and not 200 <= status < 300:
                # The checker's own proof (--broken): a writer that takes a write as made once it
                # was sent, as a node that answers before its entry commits would tell it.
                outcome = "ack"
                history.add("ack", id=wid, room=room, node=node, messageId=None, broken=True)
                break
            if 200 <= status < 300:
                m = j.get("message", {})
                outcome = "ack"
                history.add("ack", id=wid, room=room, node=node, messageId=m.get("messageId"), time=m.get("time"))
                break
            if status == 409 and code == 40903:
                outcome = "made-answer-lost"   # made, its answer lost with its node: never retried
                history.add("made", id=wid, room=room, node=node)
                break
            if status in (400, 401, 403, 404, 422):
                outcome = "refused"
                history.add("refused", id=wid, room=room, node=node, status=status, code=code)
                break
            # 0 (no answer), 409 40900 (in progress), 429, 5xx: the same key again.
            if stop_work.is_set() and give_up is None:
                give_up = time.monotonic() + args.retry_seconds
            if give_up is not None and time.monotonic() > give_up:
                outcome = "unknown"
                history.add("unknown", id=wid, room=room)
                break
            stop_all.wait(min(2.0, 0.2 * attempt))
        counts[outcome or "unknown"] = counts.get(outcome or "unknown", 0) + 1
        stop_work.wait(rng.uniform(0.15, 0.45))


def users_in(data):
    """The user ids an event names anywhere in its data (the members it is about)."""
    found = set()

    def walk(x):
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, str) and (x in USERS or x == "auditor"):
            found.add(x)
    walk(data)
    return sorted(found)


# --- A small WebSocket client (RFC 6455, text frames, no extensions) ----------------------
class WSClosed(Exception):
    pass


class WS:
    def __init__(self, host, port, path, timeout=5):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise WSClosed("handshake")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 101"):
            raise WSClosed(head.split(b"\r\n")[0].decode(errors="replace"))
        self.wlock = threading.Lock()

    def send(self, obj):
        self._frame(0x1, json.dumps(obj).encode())

    def _frame(self, opcode, payload):
        mask = os.urandom(4)
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        with self.wlock:
            self.sock.sendall(head + mask + body)

    def _frame_in_buffer(self):
        """(fin, opcode, payload) of the first whole frame in the buffer, consumed; or None
        (nothing is consumed until a frame is whole, so a read timeout loses nothing)."""
        b = self.buf
        if len(b) < 2:
            return None
        n, at = b[1] & 0x7F, 2
        if n == 126:
            if len(b) < 4:
                return None
            n, at = struct.unpack(">H", b[2:4])[0], 4
        elif n == 127:
            if len(b) < 10:
                return None
            n, at = struct.unpack(">Q", b[2:10])[0], 10
        if len(b) < at + n:
            return None
        self.buf = b[at + n:]
        return bool(b[0] & 0x80), b[0] & 0x0F, b[at:at + n]

    def recv(self):
        """The next text message (a dict), or None after a control frame; raises socket.timeout
        when nothing whole came in time."""
        while True:
            frame = self._frame_in_buffer()
            if frame is None:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise WSClosed("eof")
                self.buf += chunk
                continue
            fin, opcode, payload = frame
            if opcode == 0x8:
                code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else 1005
                raise WSClosed(f"close {code}")
            if opcode == 0x9:
                self._frame(0xA, payload)
                return None
            if opcode == 0xA:
                return None
            self.partial = getattr(self, "partial", b"") + payload
            if fin:
                message, self.partial = self.partial, b""
                return json.loads(message)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def client(user, seed):
    """A user's app: connects to a node, joins its rooms (resuming where it was), records every
    frame, and now and then moves to another node (resume), leaves a room or joins it again."""
    rng = random.Random(seed)
    rooms = {r: None for r in ROOMS if rng.random() < 0.8} or {ROOMS[0]: None}   # room -> (epoch, offset) or None
    conn_no = 0
    while not stop_all.is_set():
        node = rng.choice(NODES)
        conn_no += 1
        conn = f"{user}#{conn_no}"
        status, j = call(node, "POST", f"/v1/users/{user}/tokens", {"ttlSeconds": 3600})
        if not 200 <= status < 300:
            history.add("client-retry", c=user, conn=conn, node=node, status=status)
            stop_all.wait(0.5 + rng.random())
            continue
        stream = None
        try:
            ws = WS(addr(node), NODE_PORT, "/ws")
        except (OSError, WSClosed) as e:
            history.add("client-retry", c=user, conn=conn, node=node, error=str(e))
            stop_all.wait(0.5 + rng.random())
            continue
        ws.sock.settimeout(0.5)
        history.add("connect", c=user, conn=conn, node=node)
        pending = {}   # command id -> (op, room, resume)
        next_id = [1]

        def command(op, a, room=None, resume=None):
            i = next_id[0]
            next_id[0] += 1
            pending[i] = (op, room, resume)
            ws.send({"id": i, "op": op, "args": a})

        try:
            ws.send({"id": 0, "op": "connect", "args": {"token": j["token"]}})
            pending[0] = ("connect", None, None)
            last_frame = time.monotonic()
            next_action = time.monotonic() + rng.uniform(3, 9)
            joined_all = False
            while not stop_all.is_set():
                try:
                    m = ws.recv()
                    last_frame = time.monotonic()
                except socket.timeout:
                    m = None
                    if time.monotonic() - last_frame > 8:
                        raise WSClosed("silent for 8 s")
                if m is not None:
                    if "ev" in m:
                        data = m.get("data") or {}
                        msg = data.get("message") if isinstance(data, dict) else None
                        rec = {"c": user, "conn": conn, "ev": m["ev"], "room": m.get("roomId"), "epoch": m.get("epoch"),
                               "offset": m.get("offset")}
                        if isinstance(msg, dict):
                            rec["mid"], rec["content"] = msg.get("messageId"), msg.get("content")
                        if m["ev"] == "room.gap":
                            rec["gap"] = data
                        if m["ev"] == "room.resume":
                            rec["resume"] = data
                        rec["digest"] = hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
                        rec["users"] = users_in(data)
                        history.add("ev", **rec)
                        if m.get("offset") is not None and m.get("roomId") in rooms:
                            rooms[m["roomId"]] = (m.get("epoch"), m["offset"])
                    elif "id" in m:
                        op, room, resume = pending.pop(m["id"], (None, None, None))
                        if op == "connect":
                            if "ok" not in m:
                                raise WSClosed(f"connect refused {m.get('error')}")
                            stream = m["ok"].get("stream")
                            for r, pos in list(rooms.items()):
                                a = {"roomId": r, "mode": "enter"}
                                if pos is not None:
                                    a["resume"] = {"epoch": pos[0], "stream": stream, "offset": pos[1]}
                                command("room.join", a, r, pos)
                                history.add("join", c=user, conn=conn, room=r, resume=pos)
                            joined_all = True
                        elif op == "room.join":
                            ok = m.get("ok")
                            if ok:
                                info = ok.get("joinInfo", {})
                                history.add("joined", c=user, conn=conn, room=room, offset=info.get("offset"),
                                            epoch=(info.get("room") or {}).get("epoch"), resume=resume)
                                if rooms.get(room) is None and room in rooms:
                                    rooms[room] = ((info.get("room") or {}).get("epoch"), info.get("offset"))
                            else:
                                history.add("join-failed", c=user, conn=conn, room=room, error=m.get("error"))
                                raise WSClosed("join failed")
                        elif op == "room.leave":
                            history.add("left", c=user, conn=conn, room=room, ok="ok" in m)
                if joined_all and time.monotonic() > next_action and not stop_work.is_set():
                    next_action = time.monotonic() + rng.uniform(3, 9)
                    roll = rng.random()
                    if roll < 0.45:
                        history.add("move", c=user, conn=conn)
                        break   # reconnect elsewhere and resume
                    elif roll < 0.7 and len(rooms) > 1:
                        r = rng.choice(sorted(rooms))
                        history.add("leave", c=user, conn=conn, room=r)
                        command("room.leave", {"roomId": r}, r)
                        del rooms[r]
                    else:
                        missing = [r for r in ROOMS if r not in rooms]
                        if missing:
                            r = rng.choice(missing)
                            rooms[r] = None
                            command("room.join", {"roomId": r, "mode": "enter"}, r, None)
                            history.add("join", c=user, conn=conn, room=r, resume=None)
            if stop_all.is_set():
                # the run's end, still connected: where it got to in each room
                history.add("client-end", c=user, conn=conn, rooms={r: list(p) if p else None for r, p in rooms.items()})
        except (OSError, WSClosed, ValueError) as e:
            history.add("disconnect", c=user, conn=conn, reason=str(e)[:100])
        finally:
            ws.close()
        if not stop_all.is_set():
            history.add("disconnect", c=user, conn=conn, reason="client")
            stop_all.wait(rng.uniform(0.1, 1.0))
    history.add("client-end", c=user, rooms={r: list(p) if p else None for r, p in rooms.items()})


# --- The app servers' webhook receiver ------------------------------------------------------
class Receiver(http.server.BaseHTTPRequestHandler):
    rng = random.Random(0)
    lock = threading.Lock()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with Receiver.lock:
            fail = Receiver.rng.random() < 0.1   # the receiver itself fails now and then
        try:
            j = json.loads(body)
        except ValueError:
            j = {}
        d = j.get("data") if isinstance(j.get("data"), dict) else {}
        # message.sent carries the message's id and content in data.details
        msg = next((x for x in (d.get("details"), d.get("message"), d) if isinstance(x, dict) and "content" in x), None)
        history.add("hook", id=self.headers.get("webhook-id"), type=j.get("type"), answered=503 if fail else 204,
                    digest=hashlib.sha1(body).hexdigest()[:16], content=msg.get("content") if isinstance(msg, dict) else None,
                    mid=msg.get("messageId") if isinstance(msg, dict) else None)
        self.send_response(503 if fail else 204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


# --- Faults --------------------------------------------------------------------------------
def nft(node, action, peers=()):
    """Drops (or stops dropping) everything between a node and the given peers, inside the node's
    namespace: a partition, silent as a cut cable."""
    if action == "heal":
        subprocess.run(in_ns(node, ["nft", "delete", "table", "inet", "chaos"]), capture_output=True)
        return
    rules = "table inet chaos {\n chain in { type filter hook input priority 0; policy accept;\n"
    rules += "".join(f"  ip saddr {addr(p)} drop\n" for p in peers)
    rules += " }\n chain out { type filter hook output priority 0; policy accept;\n"
    rules += "".join(f"  ip daddr {addr(p)} drop\n" for p in peers)
    rules += " }\n}\n"
    subprocess.run(in_ns(node, ["nft", "delete", "table", "inet", "chaos"]), capture_output=True)
    subprocess.run(in_ns(node, ["nft", "-f", "-"]), input=rules.encode(), check=True)


KINDS = ["part-pg", "part-clients", "part-both", "delay", "loss", "halfopen", "pg-restart", "pg-kill", "node-kill",
         "node-stop", "node-term"]


def make_schedule(seed, seconds):
    """The seeded fault schedule: (start, kind, target, duration, parameter), one after another
    with gaps; the target 'leader' is resolved when the fault starts."""
    rng = random.Random(seed * 7919 + 1)
    kinds = args.faults.split(",") if args.faults else KINDS
    t, out = rng.uniform(2, 4), []
    while t < seconds - 3:
        kind = rng.choice(kinds)
        target = rng.choice(NODES + ["leader"])
        duration = round(rng.uniform(3, 8), 1)
        param = None
        if kind == "delay":
            param = rng.choice([100, 300, 800, 2000])
        elif kind == "loss":
            param = rng.choice([0.1, 0.3, 0.5])
        elif kind == "node-stop":
            duration = round(args.node_timeout + rng.uniform(2, 5), 1)
        elif kind in ("pg-restart", "pg-kill"):
            target, duration = "pg", round(rng.uniform(1, 4), 1)
        elif kind in ("node-kill", "node-term"):
            duration = round(rng.uniform(1, 5), 1)
        out.append((round(t, 1), kind, target, duration, param))
        t += duration + rng.uniform(1, 4)
    return out


def leader_of(nodes):
    for n in nodes.values():
        s, j = n.readyz(1)
        if j.get("cluster", {}).get("leader"):
            return n.name
    return None


def run_fault(fault, nodes, pg, proxy, seed_rng):
    at, kind, target, duration, param = fault
    if target == "leader":
        target = leader_of(nodes) or "n1"
    history.add("fault", kind=kind, target=target, duration=duration, param=param, scheduled=at)
    log(f"fault {kind} {target} {duration}s {param if param is not None else ''}")
    if kind.startswith("part-"):
        peers = {"part-pg": ["pg"], "part-clients": ["cl"], "part-both": ["pg", "cl"]}[kind]
        nft(target, "drop", peers)
        stop_all.wait(duration)
        nft(target, "heal")
    elif kind in ("delay", "loss", "halfopen"):
        extra = {"delay": {"ms": param}, "loss": {"p": param, "seed": seed_rng.getrandbits(32)}, "halfopen": {}}[kind]
        proxy.set(name=target, mode=kind, **extra)
        stop_all.wait(duration)
        proxy.set(name=target, mode="pass")
    elif kind == "pg-restart":
        pg.stop()
        stop_all.wait(duration)
        pg.start()
    elif kind == "pg-kill":
        pg.proc.signal(signal.SIGKILL)
        pg.proc.wait(5)
        stop_all.wait(duration)
        pg.start()
    elif kind in ("node-kill", "node-term"):
        n = nodes[target]
        with n.lock:
            n.down = True
        if kind == "node-kill":
            n.proc.signal(signal.SIGKILL)
            n.proc.wait(5)
        else:
            n.proc.stop(15)
        history.add("node-exit", node=target, code=n.proc.p.returncode, scheduled=True)
        stop_all.wait(duration)
        n.start()
    elif kind == "node-stop":
        n = nodes[target]
        with n.lock:
            n.stopped = True
        n.proc.signal(signal.SIGSTOP)
        stop_all.wait(duration)
        n.proc.signal(signal.SIGCONT)
        with n.lock:
            n.stopped = False
    history.add("healed", kind=kind, target=target)


# --- Settling and the digest ---------------------------------------------------------------
def settle(nodes, pg, deadline):
    """Waits until every node is ready and has applied the log's head."""
    head, last_error = -1, None
    while time.monotonic() < deadline:
        try:
            head = int(pg.psql("roomcast", "SELECT coalesce(max(position), 0) FROM roomcast_log"))
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            if str(e) != last_error:
                last_error = str(e)
                history.add("psql-error", error=last_error[:300])
                log(f"reading the log's head: {last_error[:200]}")
            time.sleep(0.5)
            continue
        states = {n.name: n.readyz() for n in nodes.values()}
        applied = {k: v[1].get("cluster", {}).get("applied", -1) for k, v in states.items()}
        if all(s == 200 for s, _ in states.values()) and all(a >= head for a in applied.values()):
            return head, applied
        time.sleep(0.5)
    return head, {n.name: nodes[n.name].readyz()[1].get("cluster", {}).get("applied", -1) for n in nodes.values()}


def rest_reads(node):
    """A node's members and whole history of each room (REST), read before any auditor joins."""
    out = {}
    for room in ROOMS:
        s, mem = call(node, "GET", f"/v1/rooms/{room}/members?limit=500")
        if s != 200:
            raise ValueError(f"reading room {room}'s members: {s}")
        # Newest first, pages strictly before `start`; the next page starts at the oldest time
        # seen plus one, so messages sharing that millisecond are read again, never skipped.
        messages, seen, start = [], set(), 0
        for _ in range(200):
            s2, hist = call(node, "GET", f"/v1/rooms/{room}/messages?limit=100&order=desc" + (f"&start={start}" if start else ""))
            if s2 != 200:
                raise ValueError(f"reading room {room}'s history: {s2}")
            page = hist.get("messages", [])
            new = [m for m in page if m.get("messageId") not in seen]
            for m in new:
                seen.add(m.get("messageId"))
                messages.append(m)
            if not new or len(page) < 100:
                break
            start = min(m.get("time", 0) for m in page) + 1
        messages.sort(key=lambda m: (m.get("time", 0), m.get("messageId")))
        out[room] = {"members": sorted(m.get("userId") for m in mem.get("members", [])),
                     "messages": [(m.get("messageId"), m.get("content")) for m in messages]}
    return out


def webhook_gauges(node):
    """The node's pending webhook deliveries from /metrics: its own run's and those parked."""
    try:
        c = http.client.HTTPConnection(addr(node), NODE_PORT, timeout=5)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
    except (OSError, http.client.HTTPException):
        return {}
    out = {}
    for line in text.splitlines():
        for name in ("roomcast_webhook_deliveries_owned", "roomcast_webhook_deliveries_parked", "roomcast_webhook_pending"):
            if line.startswith(name + " "):
                out[name.replace("roomcast_webhook_", "")] = int(float(line.split()[1]))
    return out


def digest_node(node, reads):
    """What a node holds: each room's whole event stream (an auditor joins each room resuming
    from offset 0; the resume window holds the run), its members, and its newest history."""
    out = {}
    status, j = call(node, "POST", "/v1/users/auditor/tokens", {"ttlSeconds": 600})
    if not 200 <= status < 300:
        return {"error": f"token {status}"}
    ws = WS(addr(node), NODE_PORT, "/ws")
    ws.sock.settimeout(5)
    ws.send({"id": 0, "op": "connect", "args": {"token": j["token"]}})
    stream = None
    while stream is None:
        m = ws.recv()
        if m and m.get("id") == 0:
            stream = m["ok"]["stream"]
    for i, room in enumerate(ROOMS, 1):
        s, info = call(node, "GET", f"/v1/rooms/{room}")
        epoch = (info.get("room") or {}).get("epoch")
        events = []
        # A join resuming from offset 0 replays the room's whole stream (the resume window holds
        # the run); the auditor's own join and leave come after it, and the checker compares the
        # nodes' streams up to the offset all of them reached.
        ws.send({"id": 100 + i, "op": "room.join", "args": {"roomId": room, "mode": "join",
                                                              "resume": {"epoch": epoch, "stream": stream, "offset": 0}}})
        resume = None
        while resume is None:
            m = ws.recv()
            if m is None:
                continue
            if m.get("ev") == "room.resume" and m.get("roomId") == room:
                resume = m["data"]
            elif "ev" in m and m.get("roomId") == room and m.get("offset") is not None:
                d = m.get("data") or {}
                msg = d.get("message") if isinstance(d, dict) else None
                events.append([m["offset"], m["ev"], (msg or {}).get("messageId"), (msg or {}).get("content"),
                               hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16], users_in(d)])
        ws.send({"id": 200 + i, "op": "room.leave", "args": {"roomId": room}})
        out[room] = {"epoch": epoch, "resume": resume, "events": sorted(events)}
        out[room].update(reads[room])
    ws.close()
    return out


def main():
    global args, history, signer
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--net", required=True, help="the first three octets of the addresses chaos-cluster.sh made")
    ap.add_argument("--ns", required=True, help="the namespaces' prefix")
    ap.add_argument("--pg-bin", default="/usr/lib/postgresql/15/bin")
    ap.add_argument("--fault-seconds", type=float, default=30)
    ap.add_argument("--settle-seconds", type=float, default=40)
    ap.add_argument("--retry-seconds", type=float, default=45,
                    help="after the faults, how long a writer goes on retrying a write that has no answer yet")
    ap.add_argument("--node-timeout", type=int, default=5)
    ap.add_argument("--faults", default="", help="comma-separated fault kinds to draw from (default: all)")
    ap.add_argument("--broken", default="", choices=["", "ack-on-send"],
                    help="ack-on-send: writers count a write as acknowledged when it was sent, answered or not "
                         "(what a node acknowledging before its entry commits tells them); the checker must fail")
    args = ap.parse_args()
    history = History(os.path.join(args.work, "history.jsonl"))
    signer = Signer(args.seed)
    rng = random.Random(args.seed)
    skewed = rng.choice(NODES)
    skew = rng.choice([-1, 1]) * rng.randint(60, 180) * 1000
    schedule = make_schedule(args.seed, args.fault_seconds)
    history.add("run", seed=args.seed, fault_seconds=args.fault_seconds, node_timeout=args.node_timeout,
                skew={skewed: skew}, schedule=schedule)
    log(f"seed {args.seed}: clock of {skewed} {skew / 1000:+.0f} s; schedule: " +
        "; ".join(f"{a}s {k} {t} {d}s" + (f" {p}" if p is not None else "") for a, k, t, d, p in schedule))

    receiver = http.server.ThreadingHTTPServer((addr("cl"), HOOK_PORT), Receiver)
    Receiver.rng = random.Random(args.seed + 1)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()

    pg, proxy = Postgres(), Proxy()
    nodes = {}
    status = 2
    try:
        pg.init()
        proxy.start()
        for name in NODES:
            nodes[name] = Node(name, proxy, skew if name == skewed else 0)
            nodes[name].start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(n.readyz()[0] == 200 for n in nodes.values()):
            time.sleep(0.3)
        if not all(n.readyz()[0] == 200 for n in nodes.values()):
            raise RuntimeError("the nodes did not become ready")
        # Users are in several rooms at once (RC-4's default moves a user to the room it joined last).
        s, j = call(NODES[0], "PATCH", "/v1/settings", {"multipleRoomsPerUser": True, "maxRoomsPerUser": 10})
        if not 200 <= s < 300:
            raise RuntimeError(f"settings: {s} {j}")
        for room in ROOMS:
            for _ in range(50):
                s, j = call(NODES[0], "POST", "/v1/rooms", {"roomId": room}, key=f"create-{room}")
                if 200 <= s < 300:
                    break
                time.sleep(0.3)
            else:
                raise RuntimeError(f"room {room} could not be created: {s} {j}")
        history.add("ready")
        log("cluster ready; workload and faults start")
        threading.Thread(target=supervise, args=(nodes,), daemon=True).start()
        counts = {}
        workers = [threading.Thread(target=writer, args=(n, args.seed * 100 + i, counts), daemon=True) for i, n in enumerate(NODES)]
        workers += [threading.Thread(target=client, args=(u, args.seed * 1000 + i), daemon=True) for i, u in enumerate(USERS)]
        for w in workers:
            w.start()
        fault_rng = random.Random(args.seed + 2)
        t0 = time.monotonic()
        for fault in schedule:
            wait = t0 + fault[0] - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            run_fault(fault, nodes, pg, proxy, fault_rng)
        time.sleep(max(0, t0 + args.fault_seconds - time.monotonic()))
        # Heal: nothing is left broken.
        stop_work.set()
        history.add("heal")
        for name in NODES:
            nft(name, "heal")
            proxy.set(name=name, mode="pass")
            nodes[name].proc.signal(signal.SIGCONT)
        if not pg.proc.alive():
            pg.start()
        log("healed; settling")
        end = time.monotonic() + args.settle_seconds
        head, applied = settle(nodes, pg, end)
        # Writers finish what they started (retries bounded by --retry-seconds).
        for w in workers[:len(NODES)]:
            w.join(args.retry_seconds + 10)
        history.add("settled", head=head, applied=applied)
        # Clients catch up, webhooks arrive (bounded by the settle deadline).
        time.sleep(3)
        stop_all.set()
        for w in workers[len(NODES):]:
            w.join(5)
        acked = counts.get("ack", 0)
        log(f"writes: {counts}; head {head}, applied {applied}")
        wait_hooks = time.monotonic() + 20
        while time.monotonic() < wait_hooks:
            # every node's pending deliveries are read back from its replica by the checker's
            # webhook expectations; here only a bounded wait for stragglers
            time.sleep(1)
            if history_hooks_complete():
                break
        # The clients' departures reach every node; then members and history are read on each
        # before the auditors (whose joins are changes too) read the streams back.
        head2, applied2 = settle(nodes, pg, time.monotonic() + 20)
        history.add("settled-again", head=head2, applied=applied2)
        # The pending-delivery gauges of all nodes at one moment (before the auditors' joins
        # cause webhooks of their own).
        gauges = {name: webhook_gauges(name) for name in NODES}
        reads = {}
        for name in NODES:
            try:
                reads[name] = rest_reads(name)
            except ValueError as e:
                reads[name] = None
                history.add("digest", node=name, error=f"{e}")
        for name in NODES:
            if reads[name] is None:
                continue
            try:
                history.add("digest", node=name, state=digest_node(name, reads[name]), readyz=nodes[name].readyz()[1].get("cluster"),
                            webhooks=gauges[name])
            except (OSError, WSClosed, ValueError, KeyError) as e:
                history.add("digest", node=name, error=f"{type(e).__name__}: {e}")
        history.add("end")
        status = 0
    finally:
        stop_all.set()
        stop_work.set()
        for n in nodes.values():
            n.down = True
            n.proc.stop(10)
        proxy.proc.stop(5)
        pg.stop()
        receiver.shutdown()
        history.close()
    if status != 0:
        return status
    r = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "chaos_check.py"), os.path.join(args.work, "history.jsonl")])
    return r.returncode


def history_hooks_complete():
    """Every acknowledged write's message.sent webhook has been answered 2xx at least once."""
    acks, hooks = set(), set()
    history.flush()
    with open(history.f.name) as f:
        for line in f:
            r = json.loads(line)
            if r["k"] == "ack":
                acks.add(r["id"])
            elif r["k"] == "hook" and r.get("type") == "message.sent" and r.get("answered") == 204:
                hooks.add(r.get("content"))
    return acks <= hooks


if __name__ == "__main__":
    sys.exit(main())
