#!/usr/bin/env bash
# roomcast GET /healthz against nginx `return 200` with wrk -t2 -c64, alternating rounds in the same
# run; prints each median and the ratio. Target on a 2-core machine: roomcast >= 1.0x nginx.
#
#   scripts/bench-http.sh [rounds] [seconds-per-round]     (defaults: 7 rounds of 5 s)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
secs=${2:-5}
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install -y wrk)"; exit 1; }
command -v nginx >/dev/null || { echo "nginx is not installed (apt-get install -y nginx)"; exit 1; }

swift build -c release --product roomcast >/dev/null
bin=$(swift build -c release --show-bin-path)
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rc_port=$(freeport)
ng_port=$(freeport)

ngdir=$(mktemp -d)
mkdir -p "$ngdir/logs" "$ngdir/tmp"
sed "s/__PORT__/$ng_port/" scripts/nginx-bench.conf >"$ngdir/nginx.conf"
nginx -p "$ngdir" -c nginx.conf

# Same keep-alive policy as the nginx peer (no per-connection request cap during the run).
"$bin/roomcast" --host 127.0.0.1 --port "$rc_port" --event-loops 2 --data-dir "$(mktemp -d)" \
  --max-requests-per-connection 1000000000 --log-level warning >/dev/null 2>&1 &
rc=$!
trap 'kill $rc 2>/dev/null || true; nginx -p "$ngdir" -c nginx.conf -s stop 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$rc_port/healthz" >/dev/null && break; sleep 0.05; done
curl -sf "http://127.0.0.1:$ng_port/healthz" >/dev/null

run() { wrk -t2 -c64 -d"${secs}s" "$1" | awk '/Requests\/sec/ {print $2}'; }
# Warm-up (not counted).
run "http://127.0.0.1:$rc_port/healthz" >/dev/null
run "http://127.0.0.1:$ng_port/healthz" >/dev/null

rc_results=(); ng_results=()
for i in $(seq 1 "$rounds"); do
  rc_results+=("$(run "http://127.0.0.1:$rc_port/healthz")")
  ng_results+=("$(run "http://127.0.0.1:$ng_port/healthz")")
  echo "round $i: roomcast ${rc_results[-1]} req/s, nginx ${ng_results[-1]} req/s"
done
python3 - "${rc_results[*]}" "${ng_results[*]}" <<'PY'
import statistics, sys
rc = [float(x) for x in sys.argv[1].split()]
ng = [float(x) for x in sys.argv[2].split()]
mr, mn = statistics.median(rc), statistics.median(ng)
print(f"bench-http: roomcast median {mr:,.0f} req/s (min {min(rc):,.0f}, max {max(rc):,.0f})")
print(f"bench-http: nginx    median {mn:,.0f} req/s (min {min(ng):,.0f}, max {max(ng):,.0f})")
print(f"bench-http: ratio roomcast/nginx = {mr/mn:.2f}x (target >= 1.0x)")
PY
