#!/usr/bin/env bash
# Opens N idle WebSocket connections (default 10,000) to the server and prints its RSS growth per
# connection. Target: <= 1 KiB per joined WebSocket session (and per bare WebSocket); <= 4 KiB per
# Server-Sent Events subscriber (sse).
#
#   scripts/bench-idle.sh [N] [server]    server: roomcast (default), echo, or sse
#
# Against roomcast every connection is a real session: it connects with its own token (one user
# each) and joins one room, and one message a second is published to that room while they are held.
# Against roomcast-echo the connections are bare WebSockets. The client is roomcast-bench (a
# separate process: each process may hold ~20k descriptors). With sse, each connection is a
# `GET /sse?rooms=idle` of its own user (TR-1), held by scripts/sse_idle.py, which reads and drops
# what it is sent; nothing is published while they are held.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
target=${2:-roomcast}

[ "$target" = sse ] || swift build -c release --product roomcast-bench >/dev/null
swift build -c release --product "$([ "$target" = echo ] && echo roomcast-echo || echo roomcast)" >/dev/null
bin=$(swift build -c release --show-bin-path)

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
log=$(mktemp)
if [ "$target" = echo ]; then
  "$bin/roomcast-echo" --port "$port" --no-deflate >"$log" 2>&1 &
else
  "$bin/roomcast" --host 127.0.0.1 --port "$port" --event-loops 2 --data-dir "$(mktemp -d)" \
    --app bench:bench-secret-0123456789 --connects-per-ip 1000000 --log-level warning >"$log" 2>&1 &
fi
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 200); do grep -q "listening on" "$log" && break; sleep 0.05; done
sleep 1

rss() { awk '/^VmRSS/ {print $2}' "/proc/$server/status"; }
before=$(rss)
out=$(mktemp)
if [ "$target" = echo ]; then
  "$bin/roomcast-bench" idle --port "$port" --path / --connections "$n" --hold 6 >"$out" 2>&1 &
  ready='^idle: open='
elif [ "$target" = sse ]; then
  python3 scripts/sse_idle.py "$port" "$n" bench bench-secret-0123456789 idle 8 >"$out" 2>&1 &
  ready='^sse-idle: open='
else
  "$bin/roomcast-bench" fanout --port "$port" --subscribers "$n" --rate 1 --duration 8 --room idle >"$out" 2>&1 &
  ready='^fanout: subscribers ready='
fi
client=$!
for _ in $(seq 1 3000); do grep -q "$ready" "$out" && break; sleep 0.1; done
sleep 4
after=$(rss)
wait $client || true
cat "$out"
open=$(sed -n -e 's/^idle: open=\([0-9]*\).*/\1/p' -e 's/^sse-idle: open=\([0-9]*\).*/\1/p' -e 's/^fanout: subscribers ready=\([0-9]*\).*/\1/p' "$out")
[ -n "$open" ] && [ "$open" -gt 0 ] || { echo "no connection opened"; exit 1; }
python3 - "$before" "$after" "$open" "$target" <<'PY'
import sys
before, after, n, target = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
per = (after - before) * 1024 / n
goal = 4 if target == "sse" else 1
print(f"bench-idle: server={target} connections={n} rss_before={before} KiB rss_after={after} KiB growth_per_connection={per/1024:.2f} KiB (target <= {goal} KiB)")
PY
