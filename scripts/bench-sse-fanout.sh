#!/usr/bin/env bash
# TR-1: N Server-Sent Events subscribers (default 10,000), each its own user on `GET /sse?rooms=fanout`,
# then M messages (default 10) from the app server to the room, one every 100 ms: every
# subscriber's room.message events are counted (scripts/sse_idle.py). Prints delivered/expected
# and the server's CPU for the whole run.
#
# What is measured is delivery to every subscriber, so roomcast runs with its fan-out latency
# budget (QS-2) lifted to 60 s (ROOMCAST_FANOUT_LATENCY_BUDGET; set it to measure with another): on
# two cores shared with the Python subscribers, one message's fan-out to 10,000 takes longer than
# the default 100 ms to write, and the default refuses the next normal message while it is written
# (as bench-fanout.sh, scripts/bench-overload.sh measures the budget).
#
#   scripts/bench-sse-fanout.sh [N] [M]
set -euo pipefail
export ROOMCAST_FANOUT_LATENCY_BUDGET=${ROOMCAST_FANOUT_LATENCY_BUDGET:-60000}
cd "$(dirname "$0")/.."
n=${1:-10000}
m=${2:-10}

swift build -c release --product roomcast >/dev/null
bin=$(swift build -c release --show-bin-path)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
log=$(mktemp); data=$(mktemp -d)
"$bin/roomcast" --host 127.0.0.1 --port "$port" --event-loops 2 --data-dir "$data" \
  --app bench:bench-secret-0123456789 --connects-per-ip 1000000 --log-level warning >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true; rm -rf "$data"' EXIT
for _ in $(seq 1 200); do grep -q "listening on" "$log" && break; sleep 0.05; done
cpu() { awk '{print $14 + $15}' "/proc/$server/stat"; }
before=$(cpu)
python3 scripts/sse_idle.py "$port" "$n" bench bench-secret-0123456789 fanout 120 "$m" | tee /tmp/sse-fanout.$$
after=$(cpu)
ticks=$(getconf CLK_TCK)
python3 - "$before" "$after" "$ticks" <<'PY'
import sys
before, after, tck = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
print(f"bench-sse-fanout: server_cpu_s={(after - before) / tck:.2f} (subscribers connecting and joining included)")
PY
grep -q "delivered=\([0-9]*\)/\1 " /tmp/sse-fanout.$$ && { rm -f /tmp/sse-fanout.$$; echo "bench-sse-fanout: every event delivered"; } \
  || { rm -f /tmp/sse-fanout.$$; echo "bench-sse-fanout: events missing"; exit 1; }
