#!/usr/bin/env bash
# AU-4: N clients join one room within a window (default 10 s) and stay. For each room size, one
# run with an event per member (the app's memberEventsThreshold 0, the vendors' way: a
# room.memberChanged and a NIM enter notification to every member for every join) and one with
# summaries (threshold 100: one room.members per second with the counts and the first ids), each
# on a fresh server. Prints the member-event frames and bytes the clients received, the server's
# CPU, and how many clients ended with the right member count.
#
#   scripts/bench-joinstorm.sh [sizes] [threshold] [settle-seconds]
#     sizes: space-separated room sizes (default "2500 5000 10000")
#
# A per-member run at 10,000 is N² events (about 100 million frames): it is bounded by
# settle-seconds (default 90) and reports what arrived by then.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=${1:-"2500 5000 10000"}
threshold=${2:-100}
settle=${3:-90}

swift build -c release --product roomcast-bench >/dev/null
swift build -c release --product roomcast >/dev/null
bin=$(swift build -c release --show-bin-path)

results=$(mktemp)
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT

for n in $sizes; do
  for mode in per-member batched; do
    t=0; [ "$mode" = batched ] && t=$threshold
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    log=$(mktemp); data=$(mktemp -d)
    "$bin/roomcast" --host 127.0.0.1 --port "$port" --event-loops 2 --data-dir "$data" \
      --app bench:bench-secret-0123456789 --connects-per-ip 1000000 --log-level warning >"$log" 2>&1 &
    server=$!
    for _ in $(seq 1 200); do grep -q "listening on" "$log" && break; sleep 0.05; done
    out=$(mktemp)
    "$bin/roomcast-bench" joinstorm --port "$port" --clients "$n" --window 10 --threshold "$t" --settle "$settle" \
      --server-pid "$server" | tee "$out"
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$server/status")
    kill "$server"; wait "$server" 2>/dev/null || true; server=""
    rm -rf "$data"
    python3 - "$out" "$n" "$mode" "$rss" >>"$results" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def get(key):
    m = re.search(key + r"=([0-9.]+)", text)
    return m.group(1) if m else "?"
right = re.search(r"final_count_right=(\d+)/(\d+)", text)
print("\t".join([sys.argv[2], sys.argv[3], get("member_event_frames"), get("member_event_bytes"), get("bytes_per_client"),
                 get("server_cpu_s"), f"{right.group(1)}/{right.group(2)}" if right else "?", get("closed"), get("elapsed_s"), sys.argv[4]]))
PY
  done
done

echo
printf "%-7s %-11s %12s %14s %14s %10s %13s %7s %9s %10s\n" clients mode frames bytes bytes/client cpu_s right_count closed elapsed_s rss_KiB
while IFS=$'\t' read -r n mode frames bytes per cpu right closed elapsed rss; do
  printf "%-7s %-11s %12s %14s %14s %10s %13s %7s %9s %10s\n" "$n" "$mode" "$frames" "$bytes" "$per" "$cpu" "$right" "$closed" "$elapsed" "$rss"
done <"$results"
