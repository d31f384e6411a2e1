#!/usr/bin/env bash
# AU-1: the cost of a tag-targeted message. Each round runs, each on a fresh server:
#   tagged:     10,000 members, every 10th with the tag vip; messages to targetTags {"tag": "vip"}
#               (1,000 recipients each; the other 9,000 must get nothing)
#   untargeted: 1,000 members; messages to the whole room (1,000 recipients each)
# at the same rate and duration, and prints the server's CPU per million deliveries of each and
# their ratio (target: tagged <= 1.2x untargeted).
#
#   scripts/bench-tagged.sh [rounds] [rate] [duration]    defaults: 2 rounds, 100 msg/s, 10 s
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
rate=${2:-100}
duration=${3:-10}

swift build -c release --product roomcast-bench >/dev/null
swift build -c release --product roomcast >/dev/null
bin=$(swift build -c release --show-bin-path)

server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT
results=$(mktemp)

run() {  # name subscribers extra-args...
  local name=$1 subs=$2; shift 2
  local port log data out
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  log=$(mktemp); data=$(mktemp -d); out=$(mktemp)
  "$bin/roomcast" --host 127.0.0.1 --port "$port" --event-loops 2 --data-dir "$data" \
    --app bench:bench-secret-0123456789 --connects-per-ip 1000000 --log-level warning >"$log" 2>&1 &
  server=$!
  for _ in $(seq 1 200); do grep -q "listening on" "$log" && break; sleep 0.05; done
  "$bin/roomcast-bench" fanout --port "$port" --subscribers "$subs" --rate "$rate" --duration "$duration" --room tagged \
    --server-pids "$server" "$@" | tee "$out"
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
  rm -rf "$data"
  python3 - "$out" "$name" >>"$results" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
d = re.search(r"delivered=(\d+)/(\d+)", text)
c = re.search(r"publish_cpu_s_per_million_deliveries=([0-9.]+)", text)
print(sys.argv[2], d.group(1) if d else "?", d.group(2) if d else "?", c.group(1) if c else "?")
PY
}

for r in $(seq 1 "$rounds"); do
  run tagged 10000 --tagged-every 10 --target-tag vip --client-loops 1
  run untargeted 1000
done

echo
python3 - "$results" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
print(f"{'run':<11} {'delivered':>10} {'expected':>10} {'cpu_s_per_M':>12}")
for name, got, want, cpu in rows:
    print(f"{name:<11} {got:>10} {want:>10} {cpu:>12}")
pairs = []
tagged = [float(r[3]) for r in rows if r[0] == "tagged" and r[3] != "?"]
plain = [float(r[3]) for r in rows if r[0] == "untargeted" and r[3] != "?"]
for t, p in zip(tagged, plain):
    pairs.append(t / p if p else float("nan"))
print("bench-tagged: tagged/untargeted CPU per delivery, per round: " + ", ".join(f"{x:.2f}x" for x in pairs) + " (target <= 1.2x)")
PY
