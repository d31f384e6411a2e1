#!/usr/bin/env bash
# roomcast GET /healthz against nginx `return 200` with wrk -t2 -c64, in pairs of rounds whose order
# alternates, in the same run; prints each round's req/s and server CPU per request, the medians,
# the per-pair ratios and the ratio. Target on a 2-core machine: roomcast >= 1.0x nginx.
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

ng_pids=$(cat "$ngdir/nginx.pid"; pgrep -P "$(cat "$ngdir/nginx.pid")" || true)
[ "$(echo "$ng_pids" | wc -w)" -ge 2 ] || { echo "bench-http: nginx's workers not found (pid file $ngdir/nginx.pid)"; exit 1; }
# Server CPU seconds (user + system, all threads) of the given pids, from /proc/PID/stat.
cpu() { python3 scripts/proc_cpu.py total "$@"; }
# run URL pid...: one wrk round; prints "req/s server-CPU-us-per-request".
run() {
  local url=$1; shift
  local c0 c1 out
  c0=$(cpu "$@")
  out=$(wrk -t2 -c64 -d"${secs}s" "$url")
  c1=$(cpu "$@")
  python3 -c 'import sys; r, n, c0, c1 = sys.argv[1:]; n = int(n or 0); print(r or 0, round((float(c1) - float(c0)) * 1e6 / n, 2) if n else "nan")' \
    "$(echo "$out" | awk '/Requests\/sec/ {print $2}')" "$(echo "$out" | awk '/requests in/ {print $1}')" "$c0" "$c1"
}
rc_url="http://127.0.0.1:$rc_port/healthz"
ng_url="http://127.0.0.1:$ng_port/healthz"
# Warm-up (not counted).
run "$rc_url" "$rc" >/dev/null
run "$ng_url" $ng_pids >/dev/null

# Rounds are pairs, and the pair's order alternates, so a drift in the machine's speed (other
# tenants on the host) falls on both servers alike; the per-pair ratios are reported with the medians.
rc_results=(); ng_results=()
for i in $(seq 1 "$rounds"); do
  if [ $((i % 2)) = 1 ]; then
    a=$(run "$rc_url" "$rc"); b=$(run "$ng_url" $ng_pids)
  else
    b=$(run "$ng_url" $ng_pids); a=$(run "$rc_url" "$rc")
  fi
  rc_results+=("$a"); ng_results+=("$b")
  echo "round $i: roomcast ${a% *} req/s (${a#* } us CPU/req), nginx ${b% *} req/s (${b#* } us CPU/req)"
done
python3 - "${rc_results[*]}" "${ng_results[*]}" <<'PY2'
import statistics, sys
def pairs(s):
    v = [float(x) for x in s.split()]
    return v[0::2], v[1::2]
rc, rc_cpu = pairs(sys.argv[1])
ng, ng_cpu = pairs(sys.argv[2])
mr, mn = statistics.median(rc), statistics.median(ng)
print(f"bench-http: roomcast median {mr:,.0f} req/s (min {min(rc):,.0f}, max {max(rc):,.0f}), {statistics.median(rc_cpu)} us server CPU per request")
print(f"bench-http: nginx    median {mn:,.0f} req/s (min {min(ng):,.0f}, max {max(ng):,.0f}), {statistics.median(ng_cpu)} us server CPU per request")
per_pair = sorted(a / b for a, b in zip(rc, ng))
print("bench-http: per-round ratios " + " ".join(f"{x:.2f}" for x in per_pair) + f"; median {statistics.median(per_pair):.2f}x")
print(f"bench-http: ratio roomcast/nginx = {mr/mn:.2f}x (target >= 1.0x); CPU per request roomcast/nginx = {statistics.median(rc_cpu)/statistics.median(ng_cpu):.2f}x")
PY2
