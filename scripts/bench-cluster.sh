#!/usr/bin/env bash
# Cluster mode (issue 12): one node on its SQLite file against a three-node cluster on one
# PostgreSQL 15 (fsync and synchronous_commit on: a durable comparison), in the same run.
#
#   scripts/bench-cluster.sh [subscribers]     (default 10000)
#
# 1. Acknowledged REST writes/s: signed POST /v1/rooms/bench/messages from BENCH_PUBLISHERS (96)
#    keep-alive connections with BENCH_PIPELINE (4) requests in flight each, as fast as answers
#    come; a write counts once answered 2xx (single node: after its SQLite commit; cluster: once
#    the node that took it has applied its own log entry). On the cluster the connections are
#    spread round-robin over the three nodes. A 3,000-message warm-up sizes the run to about
#    BENCH_WRITE_SECONDS (10) s. Three subscribers (one per node) check that every node delivers
#    every message. Targets: cluster >= 10,000 writes/s and >= 0.5x the single node (its default
#    durability, normal). The single node is measured once more with --durability full (an fsync
#    per commit batch, as PostgreSQL's commits here), for a like-for-like durable comparison.
# 2. Fan-out: N subscribers in one room, 300 messages published as fast as P = 4 and 16 HTTP
#    publishers get answers (as scripts/bench-fanout.sh); delivered messages/s with everything on
#    the single node vs subscribers and publishers split over two of the cluster's nodes.
#    Target: >= 0.9x. Once delivery is cheap the closed-loop publishers (one request in flight
#    each) bound the rate, and then this compares the two paths' answer times; a third run
#    publishes 600 messages from 4 connections with 16 requests in flight each, ahead of delivery.
# 3. Apply lag under the write load: a sampler reads every node's GET /readyz every 50 ms
#    (cluster.lag = head - applied in entries, as the node reports it) and, on one psql session,
#    the log's real head in PostgreSQL (max(position) of roomcast_log); p50/p99/max of both. The
#    same query counts the sessions waiting for an advisory lock (the nodes' append lock).
# 4. CPU per write at equal load: the cluster, then (the cluster stopped) a fresh single node, take
#    writes paced at 80% of the rate the cluster reached (roomcast-bench --rate), so that the
#    cluster's server CPU per acknowledged write (issue 31: <= 2.0x the single node's) is compared
#    both with each going as fast as it can (the single node two to three times faster, with
#    larger batches) and at the same load.
#
# Evidence printed with the figures: CPU seconds by thread kind during each write run (the
# nodes' threads by name, PostgreSQL's processes) and the load generator's own, and log entries
# per append transaction (rows per xmin in roomcast_log). For each fan-out run, the servers' CPU
# seconds per million deliveries over the publish phase (roomcast-bench --server-pids: the single
# node; or the three nodes and every PostgreSQL process), the cost per delivery the ratio of
# delivered msg/s stands for once publishers, not delivery, bound the rate.
#
# The single node gets two event loops, each cluster node one (BENCH_NODE_LOOPS) so that the
# three nodes' loops do not outnumber the two cores three to one. PostgreSQL, the nodes and the
# load generator (roomcast-bench, two client loops) share the machine; 127.0.0.1 only. Every
# phase runs under `timeout` and the whole script under a 10-minute one; the exit trap stops
# exactly the processes it started (by pid) and its PostgreSQL (pg_ctl stop). Logs stay in the
# printed work directory.
#
# Same work on every build: roomcast-bench sets the app's room budget (roomMessagesPerSecond) to
# its maximum (100,000/s; the write runs offer well under 10,000/s), and the nodes run with the
# fan-out latency budget (QS-2: rooms of 100 or more refuse normal messages while a node's loops
# are more than 100 ms behind) lifted to 60 s through ROOMCAST_FANOUT_LATENCY_BUDGET (a build
# without the budget ignores it), so the fan-out runs deliver every message as before.
set -euo pipefail
export ROOMCAST_FANOUT_LATENCY_BUDGET=${ROOMCAST_FANOUT_LATENCY_BUDGET:-60000}
if [ -z "${BENCH_CLUSTER_BOUNDED:-}" ]; then
  BENCH_CLUSTER_BOUNDED=1 exec timeout -k 30 600 "$0" "$@"
fi
cd "$(dirname "$0")/.."
n=${1:-10000}
publishers=${BENCH_PUBLISHERS:-96}
pipeline=${BENCH_PIPELINE:-4}
node_loops=${BENCH_NODE_LOOPS:-1}
target_seconds=${BENCH_WRITE_SECONDS:-10}
pgbin=${PG_BIN:-/usr/lib/postgresql/15/bin}
[ -x "$pgbin/pg_ctl" ] || { echo "PostgreSQL 15 server binaries not found in $pgbin (scripts/install-deps.sh test)"; exit 1; }
command -v psql >/dev/null || { echo "psql not found (apt-get install -y postgresql-client-15)"; exit 1; }

swift build -c release --product roomcast >/dev/null
swift build -c release --product roomcast-bench >/dev/null
work=$(mktemp -d)
chmod 755 "$work"
mkdir -p "$work/bin"
# Private copies: a concurrent build in .build cannot swap the binaries mid-run.
bin=$(swift build -c release --show-bin-path)
cp "$bin/roomcast" "$bin/roomcast-bench" "$work/bin/"
bin=$work/bin
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
app=bench
secret=bench-secret-0123456789
echo "bench-cluster: work directory $work"

# --- Cleanup: only what this script started ------------------------------------------------------
pids=()
pg_started=0
asroot=$([ "$(id -u)" = 0 ] && echo 1 || echo 0)
pg() { # tool args...: a PostgreSQL server tool, as the postgres user when root
  local tool=$1; shift
  if [ "$asroot" = 1 ]; then runuser -u postgres -- "$pgbin/$tool" "$@"; else "$pgbin/$tool" "$@"; fi
}
cleanup() {
  trap - EXIT INT TERM
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "$pg_started" = 1 ]; then pg pg_ctl -D "$work/pg/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true; fi
  rm -rf "$work/pg/data" "$work"/data-* "$work/bin"
}
trap cleanup EXIT
trap 'echo "bench-cluster: interrupted or out of time; stopping"; exit 130' INT TERM

wait_ready() { # port label: /readyz answers 200 (at most 60 s)
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "bench-cluster: $2 (port $1) did not become ready; its log:"
  tail -20 "$work/$2.log"
  exit 1
}

# CPU seconds (user + system) by thread kind into a JSON file: the given pids' threads by name
# (a trailing number dropped: roomcast-io-0 and -1 are roomcast-io), and every process whose
# parent is one of them (the postmaster's: PostgreSQL's backends and helpers) as "postgres";
# and the machine's idle seconds (/proc/stat) as "_idle".
cpu() { python3 scripts/proc_cpu.py kinds "$@"; } # out pid...

results="$work/results"
: >"$results"
# roomcast-bench fanout: ports label args... (bounded); keeps its output and records the figures.
bench() {
  local ports=$1 label=$2; shift 2
  local out
  out=$(timeout 120 "$bin/roomcast-bench" fanout --ports "$ports" --client-loops 2 --app-key "$app" --app-secret "$secret" \
    ${server_pids:+--server-pids "$server_pids"} "$@" 2>&1) || true
  echo "$out" >"$work/bench-$label.out"
  echo "$out" | sed "s/^/[$label] /"
  local pub errors per delivered expected p50 p99 byport cpu load accepted
  pub=$(echo "$out" | sed -n 's/.*published_per_s=\([0-9]*\).*/\1/p')
  errors=$(echo "$out" | sed -n 's/.*publish_errors=\([0-9]*\).*/\1/p')
  per=$(echo "$out" | sed -n 's/.*delivered_per_s=\([0-9]*\).*/\1/p')
  read -r delivered expected < <(echo "$out" | sed -n 's/^fanout: delivered=\([0-9]*\)\/\([0-9]*\).*/\1 \2/p') || true
  read -r p50 p99 < <(echo "$out" | sed -n 's/.*p50=\([0-9.]*\) p99=\([0-9.]*\).*/\1 \2/p') || true
  byport=$(echo "$out" | sed -n 's/.*published_by_port=\([0-9:,]*\).*/\1/p')
  cpu=$(echo "$out" | sed -n 's/.*publish_cpu_s_per_million_deliveries=\([0-9.]*\).*/\1/p')
  load=$(echo "$out" | sed -n 's/.*load_generator_run_cpu_s=\([0-9.]*\).*/\1/p')
  accepted=$(echo "$out" | sed -n 's/.* published=\([0-9]*\)\/.*/\1/p')
  echo "run $label ${pub:-0} ${errors:-nan} ${per:-0} ${delivered:-0} ${expected:-0} ${p50:-nan} ${p99:-nan} ${byport:--} ${cpu:-nan} ${load:-nan} ${accepted:-0}" >>"$results"
}
# Messages for a write run of about $target_seconds at the warm-up's rate (5,000 .. 400,000).
size_run() {
  python3 -c "import sys; r=int(sys.argv[1] or 0); print(max(5000, min(400000, r * int(sys.argv[2]))))" \
    "$(sed -n 's/.*published_per_s=\([0-9]*\).*/\1/p' "$work/bench-$1.out")" "$target_seconds"
}
# BENCH_PERF=DIR: each write run's first server process (the single node; the cluster's first
# node) is sampled with `perf record -g` into DIR/LABEL.data while the run lasts (perf report
# -i DIR/LABEL.data shows where a write's CPU goes).
perf_pid=
start_perf() { # pid label
  [ -n "${BENCH_PERF:-}" ] || return 0
  command -v perf >/dev/null || { echo "bench-cluster: BENCH_PERF set but perf is not installed"; return 0; }
  mkdir -p "$BENCH_PERF"
  perf record -F 499 -g -p "$1" -o "$BENCH_PERF/$2.data" >/dev/null 2>&1 &
  perf_pid=$!
  pids+=("$perf_pid")
}
stop_perf() {
  [ -n "$perf_pid" ] || return 0
  kill -INT "$perf_pid" 2>/dev/null || true
  wait "$perf_pid" 2>/dev/null || true
  perf_pid=
}
# A write run: warm-up, then the sized run with CPU snapshots around it.
writes() { # ports label pid...
  local ports=$1 label=$2; shift 2
  bench "$ports" "$label-warmup" --subscribers 3 --rate 0 --messages 3000 --publishers "$publishers" --pipeline "$pipeline" --room bench
  local m t0 t1
  m=$(size_run "$label-warmup")
  if [ -n "${before_writes:-}" ]; then $before_writes; fi
  cpu "$work/cpu-$label-0.json" "$@"
  start_perf "$1" "$label"
  t0=$(now)
  bench "$ports" "$label-writes" --subscribers 3 --rate 0 --messages "$m" --publishers "$publishers" --pipeline "$pipeline" --room bench
  t1=$(now)
  stop_perf
  cpu "$work/cpu-$label-1.json" "$@"
  echo "window $label-writes $t0 $t1" >>"$results"
}

# A write run paced at a fixed rate (roomcast-bench --rate, for BENCH_WRITE_SECONDS), with CPU
# snapshots around it: the cost of a write at a given load, whatever the server's capacity.
paced_writes() { # ports label rate pid...
  local ports=$1 label=$2 rate=$3; shift 3
  local t0 t1
  cpu "$work/cpu-$label-0.json" "$@"
  t0=$(now)
  bench "$ports" "$label-writes" --subscribers 3 --rate "$rate" --duration "$target_seconds" --publishers "$publishers" \
    --pipeline "$pipeline" --room bench
  t1=$(now)
  cpu "$work/cpu-$label-1.json" "$@"
  echo "window $label-writes $t0 $t1" >>"$results"
}

# A fresh single node (two event loops, its own data directory): sets $sp and $single.
start_single() { # label [roomcast args...]
  local label=$1; shift
  sp=$(freeport)
  mkdir -p "$work/data-$label"
  "$bin/roomcast" --host 127.0.0.1 --port "$sp" --event-loops 2 --data-dir "$work/data-$label" "$@" \
    --app "$app:$secret" --connects-per-ip 1000000 --log-level warning >"$work/$label.log" 2>&1 &
  single=$!
  pids+=("$single")
  wait_ready "$sp" "$label"
}

# --- 1. One node on SQLite --------------------------------------------------------------------
start_single single
writes "$sp" single "$single"
server_pids=$single
for p in 4 16; do
  bench "$sp" "single-fanout-p$p" --subscribers "$n" --rate 0 --messages 300 --publishers "$p" --pipeline 1 --room "fan$p"
done
bench "$sp" "single-fanout-pipelined" --subscribers "$n" --rate 0 --messages 600 --publishers 4 --pipeline 16 --room "fanpl"
server_pids=
kill "$single"
wait "$single" 2>/dev/null || true
# The same node with --durability full (SQLite fsyncs every commit batch, as PostgreSQL does
# every append here): writes only, for a like-for-like durable comparison.
start_single single-full --durability full
writes "$sp" single-full "$single"
kill "$single"
wait "$single" 2>/dev/null || true

# --- 2. Three nodes on one PostgreSQL 15 ------------------------------------------------------
pgport=$(freeport)
mkdir -p "$work/pg"
[ "$asroot" = 1 ] && chown -R postgres "$work/pg"
pg initdb -D "$work/pg/data" -A trust -U roomcast --no-sync -E UTF8 --locale=C >"$work/pg/initdb.log" 2>&1
# Durable: fsync and synchronous_commit stay on (the defaults). Statements over 100 ms and lock
# waits are logged, as evidence of where time goes.
pg pg_ctl -D "$work/pg/data" -l "$work/pg/log" -w -t 30 \
  -o "-p $pgport -k $work/pg -c listen_addresses=127.0.0.1 -c log_min_duration_statement=100 -c log_lock_waits=on" start >/dev/null
pg_started=1
postmaster=$(head -1 "$work/pg/data/postmaster.pid")
sql() { psql -h 127.0.0.1 -p "$pgport" -U roomcast -d "${db:-roomcast}" -qAt -F ' ' -c "$1"; }
db=postgres sql "CREATE DATABASE roomcast" >/dev/null
echo "bench-cluster: PostgreSQL $(sql 'SHOW server_version') on port $pgport, fsync=$(sql 'SHOW fsync')," \
  "synchronous_commit=$(sql 'SHOW synchronous_commit'), wal_sync_method=$(sql 'SHOW wal_sync_method')"
url="postgres://roomcast@127.0.0.1:$pgport/roomcast"

nports=()
nodes=()
for i in 1 2 3; do
  p=$(freeport)
  mkdir -p "$work/data-n$i"
  "$bin/roomcast" --host 127.0.0.1 --port "$p" --event-loops "$node_loops" --data-dir "$work/data-n$i" \
    --cluster "$url" --node-id "n$i" --app "$app:$secret" --connects-per-ip 1000000 --log-level warning \
    >"$work/n$i.log" 2>&1 &
  nodes+=($!)
  pids+=($!)
  nports+=("$p")
done
for i in 0 1 2; do wait_ready "${nports[$i]}" "n$((i + 1))"; done
all=$(IFS=,; echo "${nports[*]}")
two="${nports[0]},${nports[1]}"

loghead() { sql "SELECT coalesce(max(position), 0) FROM roomcast_log"; }
# Waits until every node has applied the log's head (at most 30 s); prints "TIME HEAD" or "never HEAD".
catch_up() {
  local head a behind port
  for _ in $(seq 1 300); do
    head=$(loghead)
    behind=0
    for port in "${nports[@]}"; do
      a=$(curl -sf "http://127.0.0.1:$port/readyz" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cluster"]["applied"])' 2>/dev/null || echo 0)
      [ "$a" -lt "$head" ] && behind=1
    done
    [ "$behind" = 0 ] && { echo "$(now) $head"; return; }
    sleep 0.1
  done
  echo "never $head"
}

# The lag sampler: the log's head in PostgreSQL, then every node's /readyz, every 50 ms, until
# the stop file appears (or 300 s).
python3 - "$work/lag.samples" "$work/lag.stop" "$pgport" "${nports[@]}" <<'PY' &
import http.client, json, os, subprocess, sys, time
out, stop, pgport, ports = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
psql = subprocess.Popen(["psql", "-h", "127.0.0.1", "-p", pgport, "-U", "roomcast", "-d", "roomcast", "-qAt"],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
def pghead():
    # The log's head, and the sessions waiting for an advisory lock (the append lock).
    psql.stdin.write("SELECT coalesce((SELECT max(position) FROM roomcast_log), 0), "
                     "(SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory');\n")
    psql.stdin.flush()
    head, waiting = psql.stdout.readline().strip().split("|")
    return int(head), int(waiting)
conns = {p: None for p in ports}
def readyz(p):
    for _ in range(2):
        try:
            if conns[p] is None:
                conns[p] = http.client.HTTPConnection("127.0.0.1", int(p), timeout=2)
            conns[p].request("GET", "/readyz")
            r = conns[p].getresponse()
            return r.status, json.loads(r.read())
        except Exception:
            conns[p] = None
    return 0, {}
end = time.time() + 300
with open(out, "w") as f:
    while not os.path.exists(stop) and time.time() < end:
        t = time.time()
        head, waiting = pghead()
        for i, p in enumerate(ports):
            status, j = readyz(p)
            c = j.get("cluster", {})
            f.write(f"{t:.3f} n{i + 1} {status} {c.get('applied', -1)} {c.get('head', -1)} {c.get('lag', -1)} {head} {waiting}\n")
        f.flush()
        time.sleep(max(0, 0.05 - (time.time() - t)))
psql.stdin.close()
psql.wait(timeout=5)
PY
sampler=$!
pids+=("$sampler")

mark_head() { catch_up >/dev/null; h0=$(loghead); }
before_writes=mark_head
writes "$all" cluster "${nodes[@]}" "$postmaster"
before_writes=
# The sampler watches the write run only: stopped before the fan-out runs, whose CPU it would add to.
touch "$work/lag.stop"
wait "$sampler" 2>/dev/null || true
t1=$(sed -n 's/^window cluster-writes [0-9.]* \([0-9.]*\)$/\1/p' "$results")
echo "caughtup $(catch_up) $t1" >>"$results"
h1=$(loghead)
# Entries per append transaction during the write run: the rows of one transaction share an xmin.
echo "batches $(sql "SELECT count(*), count(DISTINCT xmin::text) FROM roomcast_log WHERE position > $h0 AND position <= $h1")" \
  "$(sql "SELECT count(*) FROM (SELECT 1 FROM roomcast_log WHERE position > $h0 AND position <= $h1 GROUP BY xmin::text HAVING count(*) = 1) x")" \
  >>"$results"
# Part 4's paced run on the cluster, here: after the write run's figures are taken (the lag
# sampler stopped) and before the fan-out runs, whose sessions' end (their
# users going offline after the presence grace) would land in its window.
cluster_rate=$(sed -n 's/.*published_per_s=\([0-9]*\).*/\1/p' "$work/bench-cluster-writes.out")
paced_rate=$(( ${cluster_rate:-0} * 8 / 10 ))
if [ "$paced_rate" -gt 0 ]; then
  catch_up >/dev/null
  paced_writes "$all" cluster-paced "$paced_rate" "${nodes[@]}" "$postmaster"
fi
# The cluster's fan-out CPU: the three nodes and every PostgreSQL process (the postmaster's
# children: the nodes' backends, the WAL writer, ...).
server_pids=$(IFS=,; echo "${nodes[*]},$(pgrep -d, -P "$postmaster")")
for p in 4 16; do
  catch_up >/dev/null
  bench "$two" "cluster-fanout-p$p" --subscribers "$n" --rate 0 --messages 300 --publishers "$p" --pipeline 1 --room "fan$p"
done
catch_up >/dev/null
bench "$two" "cluster-fanout-pipelined" --subscribers "$n" --rate 0 --messages 600 --publishers 4 --pipeline 16 --room "fanpl"
server_pids=
echo "entries $(sql "SELECT count(*) FROM roomcast_log")" >>"$results"

echo "bench-cluster: the nodes' logs (warning level), first lines:"
for i in 1 2 3; do { grep -v -e '^\s*$' -e 'listening on' "$work/n$i.log" || true; } | head -5 | sed "s/^/[n$i] /"; done

# --- 4. CPU per write at equal load ----------------------------------------------------------
# A node's CPU per write falls as its rate rises (larger commit batches, fuller I/O wake-ups), and
# as fast as they can go the single node runs two to three times the cluster's rate. So both are
# measured once more with writes paced at the same rate, 80% of what the cluster reached: the
# cluster's run follows its write run (above), then (the cluster stopped) a fresh single node's.

# Deliveries the nodes dropped for subscribers behind their rooms (QS-3, told in room.gap; the
# load generator counts room.message events only), over every run so far.
echo "dropped $(for p in "${nports[@]}"; do curl -s "http://127.0.0.1:$p/metrics" | awk '/^roomcast_events_dropped_total/ {n += $2} END {print n + 0}'; done | paste -sd, -)" >>"$results"
for p in "${nodes[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${nodes[@]}"; do wait "$p" 2>/dev/null || true; done
if [ "$paced_rate" -gt 0 ]; then
  start_single single-paced
  bench "$sp" "single-paced-warmup" --subscribers 3 --rate 0 --messages 3000 --publishers "$publishers" --pipeline "$pipeline" --room bench
  paced_writes "$sp" single-paced "$paced_rate" "$single"
  kill "$single"
  wait "$single" 2>/dev/null || true
fi
echo "bench-cluster: PostgreSQL statements over 100 ms and lock waits: $(grep -cE 'duration:|still waiting' "$work/pg/log" || true)"
{ grep -E 'duration:|still waiting' "$work/pg/log" || true; } | head -5 | sed 's/^/[pg] /'

python3 - "$results" "$work" "$n" <<'PY'
import json, sys
results, work, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows, windows, extra = {}, {}, {}
for line in open(results):
    f = line.split()
    if f[0] == "run":
        rows[f[1]] = dict(pub=int(f[2]), errors=f[3], per=int(f[4]), delivered=int(f[5]), expected=int(f[6]), p50=f[7], p99=f[8], byport=f[9],
                          cpu=float(f[10]), load=float(f[11]), accepted=int(f[12]))
    elif f[0] == "window":
        windows[f[1]] = (float(f[2]), float(f[3]))
    else:
        extra[f[0]] = f[1:]
def q(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]
blank = dict(pub=0, errors="nan", per=0, delivered=0, expected=0, p50="nan", p99="nan", byport="-", cpu=float("nan"), load=float("nan"), accepted=0)
s, c = rows.get("single-writes", blank), rows.get("cluster-writes", blank)
print()
print("bench-cluster: summary")
print(f"{'':46} {'single node':>16} {'3-node cluster':>18} {'ratio':>7}")
def line(label, a, b, target=""):
    ratio = f"{b / a:.2f}x" if a else "-"
    print(f"{label:46} {a:>16,} {b:>18,} {ratio:>7}  {target}")
def pair(label, a, b):
    print(f"{label:46} {a:>16} {b:>18}")
def cost(label, a, b):
    # Publish phase (first publish to last delivery); the cluster's figure includes PostgreSQL.
    ratio = f"{b / a:.2f}x" if a == a and b == b and a else "-"
    print(f"{label:46} {a:>16.3f} {b:>18.3f} {ratio:>7}  (cluster: two nodes' deliveries, three nodes + PostgreSQL's CPU)")
line("acknowledged writes/s", s["pub"], c["pub"], "(targets: cluster >= 10,000/s and >= 0.5x)")
pair("  publish errors", s["errors"], c["errors"])
pair("  delivered / expected (3 subscribers)", f"{s['delivered']:,}/{s['expected']:,}", f"{c['delivered']:,}/{c['expected']:,}")
pair("  publish->receive p50 / p99 ms", f"{s['p50']} / {s['p99']}", f"{c['p50']} / {c['p99']}")
pair("  accepted per node (port:writes)", "-", c["byport"])
if "single-full-writes" in rows:
    f = rows["single-full-writes"]
    line("  single node with --durability full", f["pub"], c["pub"])
    pair("    its publish errors, p50 / p99 ms", f"{f['errors']}, {f['p50']} / {f['p99']}", "")
for p in (4, 16):
    a, b = rows.get(f"single-fanout-p{p}", blank), rows.get(f"cluster-fanout-p{p}", blank)
    line(f"fan-out delivered msg/s, {n:,} subs, P={p}", a["per"], b["per"], "(target >= 0.9x)")
    pair("  delivered / expected", f"{a['delivered']:,}/{a['expected']:,}", f"{b['delivered']:,}/{b['expected']:,}")
    pair("  published msg/s (answered); errors", f"{a['pub']:,}; {a['errors']}", f"{b['pub']:,}; {b['errors']}")
    cost("  server CPU s per million deliveries", a["cpu"], b["cpu"])
a, b = rows.get("single-fanout-pipelined", blank), rows.get("cluster-fanout-pipelined", blank)
line(f"fan-out delivered msg/s, {n:,} subs, 4x16 pipelined", a["per"], b["per"], "(publishing ahead of delivery)")
pair("  delivered / expected", f"{a['delivered']:,}/{a['expected']:,}", f"{b['delivered']:,}/{b['expected']:,}")
pair("  published msg/s (answered); errors", f"{a['pub']:,}; {a['errors']}", f"{b['pub']:,}; {b['errors']}")
cost("  server CPU s per million deliveries", a["cpu"], b["cpu"])

print()
print("CPU during the write runs (the servers by thread kind; then the load generator, on the same two cores):")
names = {"roomcast-logrea": "roomcast-logread", "roomcast-member": "roomcast-members"}
cost_per_write = {}
for label, r in (("single", s), ("single-full", rows.get("single-full-writes", blank)), ("cluster", c),
                 ("cluster-paced", rows.get("cluster-paced-writes", blank)), ("single-paced", rows.get("single-paced-writes", blank))):
    try:
        a = json.load(open(f"{work}/cpu-{label}-0.json"))
        b = json.load(open(f"{work}/cpu-{label}-1.json"))
    except OSError:
        continue
    t0, t1 = windows[f"{label}-writes"]
    wall = t1 - t0
    # The window is the whole roomcast-bench run (connects, publishing, the last deliveries);
    # every write it made counts.
    writes = r["accepted"]
    idle = b.get("_idle", 0) - a.get("_idle", 0)
    d = {k: b[k] - a.get(k, 0) for k in b if not k.startswith("_") and b[k] - a.get(k, 0) > 0.005}
    used = sum(d.values())
    per = lambda x: x * 1e6 / writes if writes else 0
    cost_per_write[label] = per(used)
    at = f" (paced: {r['pub']:,} writes/s)" if label.endswith("-paced") else ""
    print(f"  {label}{at}: {used:.1f} CPU s in {wall:.1f} s = {used / wall:.2f} cores, {per(used):.0f} us per acknowledged write; by thread kind (us per write):")
    print("    " + ", ".join(f"{names.get(k, k)} {per(v):.0f}" for k, v in sorted(d.items(), key=lambda kv: -kv[1])))
    load = r["load"]
    if load == load and writes:
        print(f"    load generator (roomcast-bench, its whole run): {load:.1f} CPU s = {per(load):.0f} us per write;"
              f" servers and load generator {(used + load) / wall:.2f} cores; the machine idle {idle / wall:.2f} of 2 cores")
parts = [f"{cost_per_write[a] / cost_per_write[b]:.2f}x {what}" for a, b, what in
         (("cluster", "single", "each as fast as it goes"), ("cluster-paced", "single-paced", "both paced at the same rate"))
         if cost_per_write.get(a) and cost_per_write.get(b)]
if parts:
    print("  server CPU per acknowledged write, cluster (three nodes and PostgreSQL) / single node: " + "; ".join(parts) + " (target <= 2.0x)")
if "dropped" in extra:
    print(f"  cluster: deliveries dropped for subscribers behind their rooms (QS-3, room.gap), per node, all runs: {extra['dropped'][0]}")
if "batches" in extra:
    rows_, txs, singles = (int(x) for x in extra["batches"])
    print(f"  cluster log: {rows_:,} entries in {txs:,} append transactions = {rows_ / txs if txs else 0:.1f} entries per append"
          f" ({singles:,} appends of a single entry); {txs / (windows['cluster-writes'][1] - windows['cluster-writes'][0]):.0f} appends/s")

reported, real, per_node, lockwait = [], [], {}, []
if "cluster-writes" in windows:
    t0, t1 = windows["cluster-writes"]
    for line_ in open(f"{work}/lag.samples"):
        t, node, status, applied, head, lag, pghead, waiting = line_.split()
        if not (t0 <= float(t) <= t1):
            continue
        if node == "n1":
            lockwait.append(int(waiting))
        if status != "200":
            continue
        reported.append(int(lag))
        real.append(max(0, int(pghead) - int(applied)))
        per_node.setdefault(node, []).append(int(lag))
print()
print(f"apply lag during the cluster write run ({len(reported)} samples: 3 nodes every 50 ms), in log entries:")
print(f"  /readyz cluster.lag (head - applied):  p50 {q(reported, .5)}  p99 {q(reported, .99)}  max {max(reported, default=0)}"
      + "   (p99 per node: " + ", ".join(f"{k} {q(v, .99)}" for k, v in sorted(per_node.items())) + ")")
print(f"  PostgreSQL's head - applied:           p50 {q(real, .5)}  p99 {q(real, .99)}  max {max(real, default=0)}")
if c["pub"] and reported:
    print(f"  p99 as time at the write rate: {q(reported, .99) / c['pub'] * 1000:.1f} ms (/readyz), {q(real, .99) / c['pub'] * 1000:.1f} ms (PostgreSQL's head)")
if lockwait:
    print(f"  appending nodes waiting for the append lock (pg_stat_activity, {len(lockwait)} samples): mean {sum(lockwait) / len(lockwait):.2f},"
          f" at least one waiting in {sum(1 for w in lockwait if w) * 100 / len(lockwait):.0f}% of samples")
if "caughtup" in extra:
    when, head, end = extra["caughtup"]
    caught = f"{float(when) - float(end):.2f} s after the last answer" if when != "never" else "NOT within 30 s"
    print(f"  every node at the log's head ({int(head):,}) {caught}")
if "entries" in extra:
    print(f"  log entries in PostgreSQL at the end: {int(extra['entries'][0]):,}")
PY
