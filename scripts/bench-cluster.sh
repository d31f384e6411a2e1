#!/usr/bin/env bash
# Cluster mode (issue 12, CL-*): one node on its SQLite file against a three-node cluster on one
# PostgreSQL 15 (fsync on, synchronous_commit on: a durable comparison), in the same run.
#
#   scripts/bench-cluster.sh [subscribers]     (default 10000)
#
# 1. Acknowledged REST writes/s: signed POST /v1/rooms/bench/messages from many concurrent
#    keep-alive connections (BENCH_PUBLISHERS, default 96, each with BENCH_PIPELINE = 4 requests
#    in flight), as fast as answers come; a write counts once answered 2xx (single node: after
#    the SQLite commit; cluster: once the node that took it has applied its own log entry). On
#    the cluster the connections are spread over the three nodes. A short warm-up sizes the run
#    to about 10 s. 3 subscribers (one per node) check that every node delivers every message.
#    Targets: cluster >= 10,000 writes/s and >= 0.5x the single node.
# 2. Fan-out: N subscribers in one room, 300 messages published as fast as P = 4 and 16 HTTP
#    publishers get answers (as scripts/bench-fanout.sh); delivered messages/s on one node vs the
#    subscribers and publishers split over two of the cluster's nodes. Target: >= 0.9x.
# 3. Apply lag: during the cluster's write run a sampler reads every node's GET /readyz every
#    50 ms (cluster.lag = head - applied, as the node reports it) and the log's real head from
#    PostgreSQL (max(position) of roomcast_log) on one psql session; p50/p99/max of both.
#
# The single node gets two event loops; each cluster node one (BENCH_NODE_LOOPS), so the three
# nodes' loops do not outnumber the cores three to one. Everything (PostgreSQL, the nodes, the
# load generator roomcast-bench with two client loops) shares the machine's cores; 127.0.0.1
# only. Every phase runs under `timeout`, a watchdog ends the whole script after 8 minutes, and
# the exit trap stops exactly the processes this script started (by pid) and its PostgreSQL
# (pg_ctl stop). Logs stay in the printed work directory.
set -euo pipefail
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
app=bench
secret=bench-secret-0123456789
echo "bench-cluster: work directory $work"

# --- cleanup: only what this script started ---------------------------------------------------
pids=()
pg_started=0
watchdog=
asroot=$([ "$(id -u)" = 0 ] && echo 1 || echo 0)
pg() { # tool args...: a PostgreSQL server tool, as the postgres user when root
  local tool=$1; shift
  if [ "$asroot" = 1 ]; then runuser -u postgres -- "$pgbin/$tool" "$@"; else "$pgbin/$tool" "$@"; fi
}
cleanup() {
  trap - EXIT INT TERM
  [ -n "$watchdog" ] && kill "$watchdog" 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "$pg_started" = 1 ]; then pg pg_ctl -D "$work/pg/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true; fi
  rm -rf "$work/pg/data" "$work"/data-* "$work/bin"
}
trap cleanup EXIT
trap 'echo "bench-cluster: interrupted"; exit 130' INT TERM
( sleep 480; echo "bench-cluster: watchdog: 8 minutes passed, stopping"; kill -TERM $$ ) &
watchdog=$!

wait_ready() { # port label: /readyz answers 200 (at most 60 s)
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "bench-cluster: $2 (port $1) did not become ready; its log:"; tail -20 "$work/$2.log"; exit 1
}

# CPU seconds (user + system) of processes: the given pids and, with pg, every process whose
# parent is the postmaster (PostgreSQL's backends, WAL writer, ...).
cpu() { # pid...
  python3 - "$@" <<'PY'
import os, sys
tck = os.sysconf("SC_CLK_TCK")
def stat(pid):
    try:
        s = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    f = s[s.rindex(")") + 2:].split()
    return int(f[1]), (int(f[11]) + int(f[12])) / tck  # ppid, utime + stime
total = 0.0
pids = set(int(p) for p in sys.argv[1:])
for d in os.listdir("/proc"):
    if not d.isdigit():
        continue
    st = stat(d)
    if st and (int(d) in pids or st[0] in pids):
        total += st[1]
print(f"{total:.2f}")
PY
}

results="$work/results"
: >"$results"
# roomcast-bench fanout ports label args...: runs it (bounded), keeps its output, records the figures.
bench() {
  local ports=$1 label=$2; shift 2
  local out
  out=$(timeout 120 "$bin/roomcast-bench" fanout --ports "$ports" --client-loops 2 --app-key "$app" --app-secret "$secret" "$@" 2>&1) || true
  echo "$out" >"$work/bench-$label.out"
  echo "$out" | sed "s/^/[$label] /"
  local pub errors per delivered expected p50 p99 byport
  pub=$(echo "$out" | sed -n 's/.*published_per_s=\([0-9]*\).*/\1/p')
  errors=$(echo "$out" | sed -n 's/.*publish_errors=\([0-9]*\).*/\1/p')
  per=$(echo "$out" | sed -n 's/.*delivered_per_s=\([0-9]*\).*/\1/p')
  read -r delivered expected < <(echo "$out" | sed -n 's/^fanout: delivered=\([0-9]*\)\/\([0-9]*\).*/\1 \2/p') || true
  read -r p50 p99 < <(echo "$out" | sed -n 's/.*p50=\([0-9.]*\) p99=\([0-9.]*\).*/\1 \2/p') || true
  byport=$(echo "$out" | sed -n 's/.*published_by_port=\([0-9:,]*\).*/\1/p')
  echo "$label ${pub:-0} ${errors:-nan} ${per:-0} ${delivered:-0} ${expected:-0} ${p50:-nan} ${p99:-nan} ${byport:--}" >>"$results"
}
published() { sed -n 's/.*published_per_s=\([0-9]*\).*/\1/p' "$work/bench-$1.out"; }
# Messages for a write run of about $target_seconds at the warm-up's rate (5,000 .. 400,000).
size_run() { python3 -c "import sys; r=int(sys.argv[1] or 0); print(max(5000, min(400000, r * int(sys.argv[2]))))" "$(published "$1")" "$target_seconds"; }
now() { date +%s.%N; }

# --- 1. One node on SQLite ----------------------------------------------------------------------
sp=$(freeport)
mkdir -p "$work/data-single"
"$bin/roomcast" --host 127.0.0.1 --port "$sp" --event-loops 2 --data-dir "$work/data-single" \
  --app "$app:$secret" --connects-per-ip 1000000 --log-level warning >"$work/single.log" 2>&1 &
single=$!
pids+=("$single")
wait_ready "$sp" single

bench "$sp" single-warmup --subscribers 3 --rate 0 --messages 3000 --publishers "$publishers" --pipeline "$pipeline" --room bench
m=$(size_run single-warmup)
c0=$(cpu "$single")
t0=$(now)
bench "$sp" single-writes --subscribers 3 --rate 0 --messages "$m" --publishers "$publishers" --pipeline "$pipeline" --room bench
t1=$(now)
c1=$(cpu "$single")
echo "cpu single-writes $c0 $c1 $t0 $t1" >>"$results"
for p in 4 16; do
  bench "$sp" "single-fanout-p$p" --subscribers "$n" --rate 0 --messages 300 --publishers "$p" --pipeline 1 --room "fan$p"
done
kill "$single"
wait "$single" 2>/dev/null || true

# --- 2. Three nodes on one PostgreSQL 15 --------------------------------------------------------
pgport=$(freeport)
mkdir -p "$work/pg"
[ "$asroot" = 1 ] && chown -R postgres "$work/pg"
pg initdb -D "$work/pg/data" -A trust -U roomcast --no-sync -E UTF8 --locale=C >"$work/pg/initdb.log" 2>&1
# Durable: fsync and synchronous_commit stay on (the defaults). Slow statements and lock waits
# are logged, as evidence of where time goes.
pg pg_ctl -D "$work/pg/data" -l "$work/pg/log" -w -t 30 \
  -o "-p $pgport -k $work/pg -c listen_addresses=127.0.0.1 -c log_min_duration_statement=100 -c log_lock_waits=on" start >/dev/null
pg_started=1
postmaster=$(head -1 "$work/pg/data/postmaster.pid")
psql -h 127.0.0.1 -p "$pgport" -U roomcast -d postgres -qAt -c "CREATE DATABASE roomcast" >/dev/null
echo "bench-cluster: PostgreSQL $(psql -h 127.0.0.1 -p "$pgport" -U roomcast -d roomcast -qAt -c 'SHOW server_version') on port $pgport," \
  "fsync=$(psql -h 127.0.0.1 -p "$pgport" -U roomcast -d roomcast -qAt -c 'SHOW fsync')," \
  "synchronous_commit=$(psql -h 127.0.0.1 -p "$pgport" -U roomcast -d roomcast -qAt -c 'SHOW synchronous_commit')"
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

# The lag sampler: every node's /readyz and the log's head in PostgreSQL, every 50 ms, until
# the stop file appears (or 200 s).
python3 - "$work/lag.samples" "$work/lag.stop" "$pgport" "${nports[@]}" <<'PY' &
import http.client, json, os, subprocess, sys, time
out, stop, pgport, ports = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
psql = subprocess.Popen(["psql", "-h", "127.0.0.1", "-p", pgport, "-U", "roomcast", "-d", "roomcast", "-qAt"],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
def pghead():
    psql.stdin.write("SELECT coalesce(max(position), 0) FROM roomcast_log;\n")
    psql.stdin.flush()
    return int(psql.stdout.readline())
conns = {p: None for p in ports}
def readyz(p):
    for _ in range(2):
        try:
            if conns[p] is None:
                conns[p] = http.client.HTTPConnection("127.0.0.1", int(p), timeout=2)
            conns[p].request("GET", "/readyz")
            r = conns[p].getresponse()
            body = r.read()
            return r.status, json.loads(body)
        except Exception:
            conns[p] = None
    return 0, {}
end = time.time() + 200
with open(out, "w") as f:
    while not os.path.exists(stop) and time.time() < end:
        t = time.time()
        head = pghead()
        for i, p in enumerate(ports):
            status, j = readyz(p)
            c = j.get("cluster", {})
            f.write(f"{t:.3f} n{i + 1} {status} {c.get('applied', -1)} {c.get('head', -1)} {c.get('lag', -1)} {head}\n")
        f.flush()
        time.sleep(max(0, 0.05 - (time.time() - t)))
psql.stdin.close()
psql.wait(timeout=5)
PY
sampler=$!
pids+=("$sampler")

bench "$all" cluster-warmup --subscribers 3 --rate 0 --messages 3000 --publishers "$publishers" --pipeline "$pipeline" --room bench
m=$(size_run cluster-warmup)
c0=$(cpu "${nodes[@]}" "$postmaster")
t0=$(now)
bench "$all" cluster-writes --subscribers 3 --rate 0 --messages "$m" --publishers "$publishers" --pipeline "$pipeline" --room bench
t1=$(now)
c1=$(cpu "${nodes[@]}" "$postmaster")
echo "cpu cluster-writes $c0 $c1 $t0 $t1" >>"$results"
# Every node catches up with the log (at most 30 s).
caught=
for _ in $(seq 1 300); do
  head=$(psql -h 127.0.0.1 -p "$pgport" -U roomcast -d roomcast -qAt -c "SELECT coalesce(max(position), 0) FROM roomcast_log")
  behind=0
  for p in "${nports[@]}"; do
    a=$(curl -sf "http://127.0.0.1:$p/readyz" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cluster"]["applied"])' 2>/dev/null || echo 0)
    [ "$a" -lt "$head" ] && behind=1
  done
  [ "$behind" = 0 ] && { caught=$(now); break; }
  sleep 0.1
done
echo "caughtup ${caught:-never} $t1 $head" >>"$results"
for p in 4 16; do
  bench "$two" "cluster-fanout-p$p" --subscribers "$n" --rate 0 --messages 300 --publishers "$p" --pipeline 1 --room "fan$p"
done
touch "$work/lag.stop"
wait "$sampler" 2>/dev/null || true
entries=$(psql -h 127.0.0.1 -p "$pgport" -U roomcast -d roomcast -qAt -c "SELECT count(*) FROM roomcast_log")
echo "entries $entries" >>"$results"
echo "bench-cluster: node logs (warnings and errors):"
for i in 1 2 3; do grep -v '^\s*$' "$work/n$i.log" | head -5 | sed "s/^/[n$i] /"; done
echo "bench-cluster: PostgreSQL slow statements (>= 100 ms) and lock waits: $(grep -cE 'duration:|still waiting' "$work/pg/log" || true)"
grep -E 'duration:|still waiting' "$work/pg/log" | head -5 | sed 's/^/[pg] /' || true

python3 - "$results" "$work/lag.samples" "$n" <<'PY'
import sys
rows, cpu, extra = {}, {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "cpu":
        cpu[f[1]] = (float(f[3]) - float(f[2]), float(f[5]) - float(f[4]))
    elif f[0] in ("caughtup", "entries"):
        extra[f[0]] = f[1:]
    else:
        rows[f[0]] = dict(pub=int(f[1]), errors=f[2], per=int(f[3]), delivered=int(f[4]), expected=int(f[5]), p50=f[6], p99=f[7], byport=f[8])
n = int(sys.argv[3])
def q(xs, p):
    if not xs: return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]
s, c = rows.get("single-writes"), rows.get("cluster-writes")
print()
print("bench-cluster: summary")
print(f"{'':44} {'single node':>14} {'3-node cluster':>16} {'ratio':>8}")
def line(label, a, b, target=""):
    ratio = f"{b / a:.2f}x" if a else "-"
    print(f"{label:44} {a:>14,} {b:>16,} {ratio:>8}  {target}")
line("acknowledged writes/s", s["pub"], c["pub"], "(targets: cluster >= 10,000/s and >= 0.5x)")
print(f"{'  publish errors':44} {s['errors']:>14} {c['errors']:>16}")
print(f"{'  deliveries to 3 subscribers':44} {s['delivered']:>7,}/{s['expected']:<7,} {c['delivered']:>8,}/{c['expected']:<8,}")
print(f"{'  publish->receive p50 / p99 ms':44} {s['p50'] + ' / ' + s['p99']:>14} {c['p50'] + ' / ' + c['p99']:>16}")
print(f"{'  writes per node (port:accepted)':44} {'-':>14} {c['byport']:>16}")
for k, label in (("single-writes", "single"), ("cluster-writes", "cluster")):
    if k in cpu:
        used, wall = cpu[k]
        r = rows[k]
        writes = r["pub"] * wall
        print(f"  {label}: server CPU {used:.1f} s in {wall:.1f} s wall = {used / wall:.2f} cores"
              f"{' (3 nodes + PostgreSQL)' if label == 'cluster' else ''}; {used * 1e6 / writes if writes else 0:.0f} us CPU per write")
for p in (4, 16):
    a, b = rows.get(f"single-fanout-p{p}"), rows.get(f"cluster-fanout-p{p}")
    if a and b:
        line(f"fan-out delivered msg/s, {n:,} subs, P={p}", a["per"], b["per"], "(target >= 0.9x)")
        print(f"{'  delivered / expected':44} {a['delivered']:>7,}/{a['expected']:<7,} {b['delivered']:>8,}/{b['expected']:<8,}")
# Lag during the cluster's write run.
t0, t1 = None, None
for line_ in open(sys.argv[1]):
    f = line_.split()
    if f[:2] == ["cpu", "cluster-writes"]:
        t0, t1 = float(f[4]), float(f[5])
reported, real, per_node = [], [], {}
for line_ in open(sys.argv[2]):
    t, node, status, applied, head, lag, pghead = line_.split()
    if t0 is None or not (t0 <= float(t) <= t1) or status != "200":
        continue
    reported.append(int(lag))
    real.append(max(0, int(pghead) - int(applied)))
    per_node.setdefault(node, []).append(int(lag))
print(f"apply lag during the cluster write run, {len(reported)} samples (3 nodes, every 50 ms):")
print(f"  /readyz cluster.lag (head - applied, entries): p50 {q(reported, .5)}  p99 {q(reported, .99)}  max {max(reported, default=0)}"
      + "   per node p99: " + " ".join(f"{k} {q(v, .99)}" for k, v in sorted(per_node.items())))
print(f"  PostgreSQL head - applied (entries):          p50 {q(real, .5)}  p99 {q(real, .99)}  max {max(real, default=0)}")
if c["pub"]:
    print(f"  p99 in time at the write rate: reported {q(reported, .99) / c['pub'] * 1000:.1f} ms, PostgreSQL head {q(real, .99) / c['pub'] * 1000:.1f} ms")
if "caughtup" in extra:
    when, end, head = extra["caughtup"]
    print(f"  all nodes at the log's head ({int(head):,}) {'%.2f s after the last answer' % (float(when) - float(end)) if when != 'never' else 'NOT within 30 s'}")
if "entries" in extra:
    print(f"  log entries in PostgreSQL at the end: {int(extra['entries'][0]):,}")
PY
