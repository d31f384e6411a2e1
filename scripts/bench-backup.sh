#!/usr/bin/env bash
# OP-1: an online backup of a ~1 GB data directory while the node takes ~1,000 acknowledged
# writes per second, and what the backup does to those writes' latency.
#
#   scripts/bench-backup.sh [size_mb] [rate]        (defaults: 1024 MB, 1000 writes/s)
#
# 1. Fill: a release roomcast on a fresh data directory gets 8 KB messages in 100 rooms (the app's
#    history limits raised so they are all kept) as fast as it acknowledges them, until its
#    database file is at least SIZE MB.
# 2. Baseline: RATE signed writes/s (200-byte messages, 10 rooms, 8 keep-alive connections, open
#    loop: latency from each write's scheduled time) for BENCH_SECONDS (30) s, no backup.
# 3. During a backup: the same load; after 3 s `roomcast backup --data-dir D --to FILE` (another
#    process, default pace) copies the database while the node serves; the load goes on until
#    2 s after the backup has finished. The latency of the writes scheduled while the backup
#    ran is compared with the baseline's (target: p99 <= 2x).
# 4. The baseline load again (the machine is shared: what changed meanwhile shows), then the backup
#    file is restored into a new directory, where a node starts and answers.
# Results (the figures BENCHMARKS.md quotes) are printed at the end. Every process this script
# starts is stopped by pid on exit; the work directory (the data directory is large) is removed
# unless BENCH_KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mb=${1:-1024}
rate=${2:-1000}
window=${BENCH_SECONDS:-30}
app=bench
secret=bench-secret-0123456789

swift build -c release --product roomcast >/dev/null
swift build -c release --product roomcast-bench >/dev/null
bin=$(swift build -c release --show-bin-path)
work=$(mktemp -d "${BENCH_DIR:-/var/tmp}/roomcast-bench-backup.XXXXXX")
mkdir -p "$work/bin"
# Private copies: a concurrent build in .build cannot swap the binaries mid-run.
cp "$bin/roomcast" "$bin/roomcast-bench" "$work/bin/"
bin=$work/bin
data=$work/data
echo "bench-backup: work directory $work (size ${size_mb} MB, ${rate} writes/s)"

pids=()
cleanup() {
    trap - EXIT INT TERM
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    if [ "${BENCH_KEEP:-0}" = 1 ]; then echo "bench-backup: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT INT TERM

start_node() { # data-dir log -> sets port
    "$bin/roomcast" --port 0 --data-dir "$1" --app "$app:$secret" --log-level warning >"$2" 2>&1 &
    pids+=($!)
    node_pid=$!
    port=""
    for _ in $(seq 1 300); do
        port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$2" | head -1)
        [ -n "$port" ] && return 0
        kill -0 "$node_pid" 2>/dev/null || break
        sleep 0.1
    done
    cat "$2"
    echo "roomcast did not start" >&2
    exit 1
}
db_mb() { echo $(( $(stat -c %s "$data/roomcast.sqlite") / 1048576 )); }
now_ms() { date +%s%3N; }

if [ -n "${BENCH_DATA:-}" ]; then
    # A data directory filled by an earlier run (BENCH_KEEP=1 keeps one): copied, not refilled.
    echo "== copying the filled data directory $BENCH_DATA"
    cp -a "$BENCH_DATA" "$data"
fi
start_node "$data" "$work/node.log"
echo "== fill to ${size_mb} MB"
fill_start=$(date +%s)
"$bin/roomcast-bench" writes --port "$port" --rate 0 --count 1 --rooms 100 --payload-bytes 8000 --app-key "$app" --app-secret "$secret" >/dev/null
while [ "$(db_mb)" -lt "$size_mb" ]; do
    "$bin/roomcast-bench" writes --port "$port" --rate 0 --count 5000 --rooms 100 --payload-bytes 8000 --connections 16 --pipeline 8 \
        --no-prepare --app-key "$app" --app-secret "$secret" | grep -E "acknowledged|error" | sed 's/^/  /'
    echo "  database $(db_mb) MB after $(( $(date +%s) - fill_start )) s"
done

load() { # seconds record-file
    "$bin/roomcast-bench" writes --port "$port" --rate "$rate" --duration "$1" --rooms 10 --payload-bytes 200 --connections 8 --pipeline 8 \
        --app-key "$app" --app-secret "$secret" --record "$2"
}

echo "== baseline: ${rate} writes/s for ${window} s, no backup"
sleep 2
load "$window" "$work/baseline.rec" | sed 's/^/  /'

echo "== the same load with roomcast backup running"
load_until() { # stop-file record-file
    "$bin/roomcast-bench" writes --port "$port" --rate "$rate" --duration 3600 --rooms 10 --payload-bytes 200 --connections 8 --pipeline 8 \
        --app-key "$app" --app-secret "$secret" --no-prepare --stop-file "$1" --record "$2"
}
load_until "$work/stop" "$work/during.rec" >"$work/during.out" &
load_pid=$!
pids+=($load_pid)
sleep 3
backup_start=$(now_ms)
"$bin/roomcast" backup --data-dir "$data" --to "$work/backup.sqlite" ${BENCH_BACKUP_OPTIONS:-} | sed 's/^/  /'
backup_end=$(now_ms)
sleep 2
touch "$work/stop"
wait "$load_pid"
sed 's/^/  /' "$work/during.out"
echo "  backup took $(( backup_end - backup_start )) ms for $(( $(stat -c %s "$work/backup.sqlite") / 1048576 )) MB (database $(db_mb) MB)"

echo "== baseline again: ${rate} writes/s for ${window} s, no backup (the machine may have changed meanwhile)"
sleep 2
load "$window" "$work/after.rec" | sed 's/^/  /'

echo "== restore and start"
"$bin/roomcast" restore --from "$work/backup.sqlite" --data-dir "$work/restored" | sed 's/^/  /'
kill "$node_pid"
wait "$node_pid" 2>/dev/null || true
start_node "$work/restored" "$work/restored.log"
curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && echo "  restored node ready on port $port"

echo "== results (load average while it ran: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores)"
python3 - "$work/baseline.rec" "$work/during.rec" "$backup_start" "$backup_end" "$work/after.rec" <<'EOF'
import sys
baseline, during, start, end, after = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def load(path, lo=None, hi=None):
    out = []
    for line in open(path):
        t, lat, status = line.split()
        t = int(t)
        if lo is not None and not (lo <= t <= hi):
            continue
        out.append((int(lat), int(status)))
    return out
def q(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(len(values) * p + 0.999999) - 1))] / 1000.0
b = load(baseline)
d = load(during, start, end)
a = load(after)
bad = sum(1 for _, s in b + d + a if not 200 <= s < 300)
def row(name, rows):
    ls = [l for l, _ in rows]
    print("  %-14s %6d writes  p50 %7.2f ms  p99 %7.2f ms  p99.9 %7.2f ms  max %7.2f ms" % (name, len(ls), q(ls, .5), q(ls, .99), q(ls, .999), max(ls) / 1000.0))
    return q(ls, .99)
pb = row("baseline:", b)
pd = row("during backup:", d)
pa = row("baseline after:", a)
print("  p99 during / baseline before: %.2fx, / after: %.2fx, / the two together: %.2fx (target <= 2x); refused writes: %d"
      % (pd / pb, pd / pa, pd / q([l for l, _ in b + a], .99), bad))
EOF
