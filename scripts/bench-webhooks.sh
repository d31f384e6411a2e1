#!/usr/bin/env bash
# Webhook delivery speed (WH-6): N signed webhooks (default 100,000) written to the durable outbox
# and delivered through libcurl to a local receiver, against wrk POSTing the same-sized body to the
# same receiver (no signing, no outbox, no bookkeeping) in the same run. Target: >= 5,000/s.
#
#   scripts/bench-webhooks.sh [messages] [concurrency]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100000}
c=${2:-64}
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install -y wrk)"; exit 1; }
swift build -c release --product roomcast-webhook-bench >/dev/null
bin=$(swift build -c release --show-bin-path)
log=$(mktemp)
"$bin/roomcast-webhook-bench" receive --port 0 --event-loops 1 >"$log" 2>&1 &
receiver=$!
trap 'kill $receiver 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do grep -q "listening on" "$log" && break; sleep 0.05; done
port=$(sed -n 's/.*127.0.0.1:\([0-9]*\)\/hook.*/\1/p' "$log")

peer=$(wrk -t1 -c"$c" -d5s -s scripts/wrk-post.lua "http://127.0.0.1:$port/hook" | awk '/Requests\/sec/ {print $2}')
echo "bench-webhooks: wrk POST (peer, same receiver, concurrency $c): $peer req/s"
out=$("$bin/roomcast-webhook-bench" webhooks --receiver-port "$port" --messages "$n" --concurrency "$c")
echo "$out"
ours=$(echo "$out" | sed -n 's/.*deliveries_per_s=\([0-9]*\).*/\1/p')
python3 - "$ours" "$peer" <<'PY'
import sys
ours, peer = float(sys.argv[1]), float(sys.argv[2])
print(f"bench-webhooks: roomcast {ours:,.0f} deliveries/s (target >= 5,000/s) = {ours/peer:.2f}x of wrk's raw POST rate to the same receiver")
PY
