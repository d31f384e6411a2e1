#!/usr/bin/env bash
# Where a fan-out delivery's CPU goes: roomcast alone, N subscribers (default 10,000) in one room,
# 300 messages published as fast as P publishers (default 4) get answers, as in bench-fanout.sh's
# throughput case. During the publish phase only (from the subscribers being ready to the
# bench's end):
#   - `perf record` (software cpu-clock sampling, call graphs) of the roomcast process: the top
#     user-space and kernel symbols, self time;
#   - `perf stat` of the syscall tracepoints (raw_syscalls:sys_enter and the write, writev,
#     read, epoll_wait entries): syscalls per delivery.
#
#   scripts/profile-fanout.sh [--publishers P] [--payload-bytes N] [subscribers]
#
# Needs linux-perf (apt-get install -y linux-perf) and root or perf_event_paranoid <= 1.
set -euo pipefail
cd "$(dirname "$0")/.."
publishers=4
payload=0
while [ $# -gt 0 ]; do
  case $1 in
    --publishers) publishers=$2; shift 2 ;;
    --payload-bytes) payload=$2; shift 2 ;;
    *) break ;;
  esac
done
n=${1:-10000}
command -v perf >/dev/null || { echo "perf is not installed (apt-get install -y linux-perf)"; exit 1; }

swift build -c release --product roomcast >/dev/null
swift build -c release --product roomcast-bench >/dev/null
bin=$(swift build -c release --show-bin-path)
work=$(mktemp -d)
. scripts/start-roomcast.sh
start_roomcast "$bin/roomcast" bench:bench-secret-0123456789 --host 127.0.0.1 --event-loops 2 --connects-per-ip 1000000
rc=$roomcast_pid
port=$roomcast_port
# perf record and perf stat follow roomcast's pid: they end when start_roomcast's exit trap stops it.
perfs=()

out="$work/bench.out"
timeout 300 "$bin/roomcast-bench" fanout --port "$port" --client-loops 2 --subscribers "$n" --rate 0 --messages 300 \
  --publishers "$publishers" --pipeline 1 --room prof --payload-bytes "$payload" --server-pids "$rc" >"$out" 2>&1 &
bench=$!
for _ in $(seq 1 3000); do grep -q '^fanout: subscribers ready' "$out" && break; sleep 0.01; done
perf record -F 2000 -e cpu-clock -g -p "$rc" -o "$work/perf.data" >/dev/null 2>&1 &
perfs+=($!)
perf stat -e 'raw_syscalls:sys_enter,syscalls:sys_enter_writev,syscalls:sys_enter_write,syscalls:sys_enter_read,syscalls:sys_enter_epoll_wait' \
  -p "$rc" -o "$work/stat.txt" >/dev/null 2>&1 &
perfs+=($!)
wait $bench || true
for p in "${perfs[@]}"; do kill -INT "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
perfs=()
cat "$out"
delivered=$(sed -n 's/^fanout: delivered=\([0-9]*\)\/.*/\1/p' "$out")
echo "== syscalls during the publish phase (delivered=$delivered)"
python3 - "$work/stat.txt" "${delivered:-0}" <<'PY'
import re, sys
delivered = int(sys.argv[2]) or 1
for line in open(sys.argv[1]):
    m = re.match(r"\s*([\d,]+)\s+(\S+)", line)
    if m and ":" in m.group(2):
        count = int(m.group(1).replace(",", ""))
        print(f"profile-fanout: {m.group(2)}: {count:,} = {count / delivered:.3f} per delivery")
PY
echo "== top symbols, self time (user space and kernel)"
perf report -i "$work/perf.data" --no-children --sort sym --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -40
echo "(perf data: $work/perf.data)"
