#!/usr/bin/env bash
# Server memory per room and per stored message (SPEC §13; the audit's memory findings): starts a
# release roomcast, reads its RSS (/proc/PID/status), creates N rooms through the signed REST API,
# reads RSS again, then stores M messages of 200 bytes spread over the first rooms and reads it
# once more. Each room keeps at most 50 messages / 64 KiB in memory; the rest is on disk.
#
#   scripts/bench-memory.sh [rooms] [messages]      (defaults 10000, 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
rooms=${1:-10000}
messages=${2:-100000}
swift build -c release --product roomcast >/dev/null
bin=$(swift build -c release --show-bin-path)
. scripts/start-roomcast.sh
start_roomcast "$bin/roomcast" bench:bench-secret
pid=$roomcast_pid port=$roomcast_port
python3 - "$pid" "$port" "$rooms" "$messages" <<'PY'
import hashlib, http.client, json, sys, time, uuid
pid, port, rooms, messages = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
conn = http.client.HTTPConnection("127.0.0.1", port)
def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"): return int(line.split()[1])
def call(method, path, body):
    nonce, ts = uuid.uuid4().hex, str(int(time.time()))
    sig = hashlib.sha1(("bench-secret" + nonce + ts).encode()).hexdigest()
    data = json.dumps(body).encode()
    conn.request(method, path, data, {"App-Key": "bench", "Nonce": nonce, "Timestamp": ts, "Signature": sig, "Content-Type": "application/json"})
    r = conn.getresponse(); r.read()
    if r.status >= 300: raise SystemExit(f"{method} {path}: {r.status}")
call("PATCH", "/v1/settings", {"maxRooms": max(rooms, 1), "restCallsPerSecond": 1000000})
time.sleep(0.5)
base = rss()
for i in range(rooms): call("POST", "/v1/rooms", {"roomId": f"room{i}", "name": f"Room {i}"})
time.sleep(0.5)
after_rooms = rss()
content = "x" * 200
per_room_msgs = 100
for i in range(messages): call("POST", f"/v1/rooms/room{(i // per_room_msgs) % rooms}/messages", {"content": content})
time.sleep(0.5)
after_messages = rss()
print(f"bench-memory: base RSS {base} KiB; {rooms} rooms -> +{after_rooms - base} KiB = {(after_rooms - base) * 1024 / rooms:.0f} B per room")
print(f"bench-memory: {messages} stored messages of 200 B ({per_room_msgs} per room, {min(per_room_msgs, 50)} kept in memory) -> "
      f"+{after_messages - after_rooms} KiB = {(after_messages - after_rooms) * 1024 / messages:.0f} B per stored message")
PY
