#!/usr/bin/env bash
# User-space instructions per GET /healthz, roomcast against nginx `return 200`, counted by
# valgrind's callgrind in the same run: each server runs one event loop (one worker) under
# callgrind, is warmed up, its counters are zeroed, wrk -t1 -c8 runs for a fixed time, and the
# counters are divided by the requests wrk completed. Instruction counts do not depend on what
# else the machine is doing (unlike req/s), so this shows the HTTP path's own cost, which
# scripts/bench-http.sh's throughput ratio mixes with the kernel's loopback TCP and the machine.
#
#   scripts/bench-http-instructions.sh [seconds]     (default 6)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-6}
for tool in valgrind callgrind_control callgrind_annotate wrk nginx objcopy; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed (apt-get install -y valgrind wrk nginx binutils)" >&2; exit 1; }
done

swift build -c release --product roomcast >/dev/null
bin=$(swift build -c release --show-bin-path)
work=$(mktemp -d)
# valgrind 3.19 (Debian 12) cannot read the DWARF 5 the Swift toolchain writes; the symbol table
# is all callgrind needs to count, so it runs a copy without debug sections.
objcopy --strip-debug "$bin/roomcast" "$work/roomcast"
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rc_port=$(freeport)
ng_port=$(freeport)
mkdir -p "$work/ng/logs" "$work/ng/tmp" "$work/data"
# One worker, in the foreground, without a master (so callgrind follows the process serving).
sed -e "s/__PORT__/$ng_port/" -e 's/^worker_processes .*;/worker_processes 1;/' scripts/nginx-bench.conf >"$work/ng/nginx.conf"
grep -q '^worker_processes 1;' "$work/ng/nginx.conf" || { echo "bench-http-instructions: no worker_processes line in scripts/nginx-bench.conf" >&2; exit 1; }

pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
valgrind --tool=callgrind --callgrind-out-file="$work/rc.out" "$work/roomcast" --host 127.0.0.1 --port "$rc_port" \
  --event-loops 1 --data-dir "$work/data" --max-requests-per-connection 1000000000 --log-level warning >"$work/rc.log" 2>&1 &
pids+=($!)
rc=$!
valgrind --tool=callgrind --callgrind-out-file="$work/ng.out" nginx -g 'daemon off; master_process off;' -p "$work/ng" -c nginx.conf \
  >"$work/ng.log" 2>&1 &
pids+=($!)
ng=$!

# count PID PORT NAME: instructions per request, printed as "NAME requests instructions per-request".
count() {
  local pid=$1 port=$2 name=$3 out n total
  for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.2; done
  wrk -t1 -c8 -d2s "http://127.0.0.1:$port/healthz" >/dev/null
  # Zeroing must work, or start-up and warm-up would be counted too.
  callgrind_control -z "$pid" >"$work/$name.zero" 2>&1 || { echo "bench-http-instructions: zeroing $name's counters failed:" >&2; cat "$work/$name.zero" >&2; exit 1; }
  out=$(wrk -t1 -c8 -d"${secs}s" "http://127.0.0.1:$port/healthz")
  callgrind_control -d "$pid" >"$work/$name.dump" 2>&1 || { echo "bench-http-instructions: dumping $name's counters failed:" >&2; cat "$work/$name.dump" >&2; exit 1; }
  n=$(echo "$out" | awk '/requests in/ {print $1}')
  # The dump after zeroing is the newest part file.
  total=$(callgrind_annotate "$(ls -t "$work/$name.out".* | head -1)" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  [ -n "$n" ] && [ "$n" -gt 0 ] && [ -n "$total" ] || { echo "bench-http-instructions: no count for $name (see $work)" >&2; exit 1; }
  echo "$name $n $total $((total / n))"
}
r=$(count "$rc" "$rc_port" rc)
g=$(count "$ng" "$ng_port" ng)
set -- $r; rc_per=$4; echo "bench-http-instructions: roomcast $4 instructions per request ($2 requests)"
set -- $g; ng_per=$4; echo "bench-http-instructions: nginx    $4 instructions per request ($2 requests)"
python3 -c "import sys; print(f'bench-http-instructions: ratio roomcast/nginx = {int(sys.argv[1]) / int(sys.argv[2]):.2f}x (user-space instructions per request; lower is cheaper)')" "$rc_per" "$ng_per"
