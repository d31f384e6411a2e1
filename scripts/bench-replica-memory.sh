#!/usr/bin/env bash
# A cluster node's memory with many stored messages against a single node's (issue 31, CL-9): the
# same M messages of 200 bytes (default 1,000,000, over R rooms, default 1,000, so that each room
# keeps all of its own) are written through the signed REST API (`roomcast-bench writes`, 32
# keep-alive connections, 8 requests in flight each) to a single node on its SQLite file, then to
# node 1 of a three-node cluster on one PostgreSQL 15; every cluster node applies every message to
# its replica. Printed for each server: RSS (VmRSS) before and after the writes, its peak (VmHWM),
# and the messages its database holds; then each cluster node's RSS against the single node's.
# Target: <= 1.5x.
#
#   scripts/bench-replica-memory.sh [messages] [rooms]
#
# BENCH_NODE_ARGS adds options to every server (single and cluster alike), e.g.
# `--resume-events 64`: each room's resume window (1,024 events, at most 1 MiB, by default) is
# held in memory on every node, so with 1,000 rooms it is most of either server's RSS.
#
# 127.0.0.1 only; the whole script runs under a 60-minute `timeout` and its exit trap stops exactly
# the processes it started (by pid) and its PostgreSQL (pg_ctl stop).
set -euo pipefail
if [ -z "${BENCH_REPLICA_BOUNDED:-}" ]; then
  BENCH_REPLICA_BOUNDED=1 exec timeout -k 30 3600 "$0" "$@"
fi
cd "$(dirname "$0")/.."
messages=${1:-1000000}
rooms=${2:-1000}
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
echo "bench-replica-memory: $messages messages over $rooms rooms; server options: ${BENCH_NODE_ARGS:-none}; work directory $work"

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
trap 'echo "bench-replica-memory: interrupted or out of time; stopping"; exit 130' INT TERM

wait_ready() { # port label
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "bench-replica-memory: $2 (port $1) did not become ready; its log:"
  tail -20 "$work/$2.log"
  exit 1
}
kib() { sed -n "s/^$2:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$1/status"; } # pid field
stored() { # database file: messages it holds
  python3 -c 'import sqlite3, sys; print(sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True).execute("SELECT count(*) FROM message").fetchone()[0])' "$1"
}
write_all() { # port
  timeout 2400 "$bin/roomcast-bench" writes --port "$1" --rate 0 --count "$messages" --rooms "$rooms" --connections 32 --pipeline 8 \
    --payload-bytes 200 --app-key "$app" --app-secret "$secret" | sed 's/^/  /'
}

# --- One node on its SQLite file ----------------------------------------------------------------
sp=$(freeport)
mkdir -p "$work/data-single"
"$bin/roomcast" --host 127.0.0.1 --port "$sp" --event-loops 2 --data-dir "$work/data-single" --app "$app:$secret" \
  --connects-per-ip 1000000 --log-level warning ${BENCH_NODE_ARGS:-} >"$work/single.log" 2>&1 &
single=$!
pids+=("$single")
wait_ready "$sp" single
sleep 1
single_before=$(kib "$single" VmRSS)
echo "single node: writing"
write_all "$sp"
sleep 3
single_after=$(kib "$single" VmRSS)
single_peak=$(kib "$single" VmHWM)
single_stored=$(stored "$work/data-single/roomcast.sqlite")
echo "single node: RSS $single_before -> $single_after KiB (peak $single_peak), $single_stored messages stored"
kill "$single"
wait "$single" 2>/dev/null || true

# --- Three nodes on one PostgreSQL 15 -----------------------------------------------------------
pgport=$(freeport)
mkdir -p "$work/pg"
[ "$asroot" = 1 ] && chown -R postgres "$work/pg"
pg initdb -D "$work/pg/data" -A trust -U roomcast --no-sync -E UTF8 --locale=C >"$work/pg/initdb.log" 2>&1
pg pg_ctl -D "$work/pg/data" -l "$work/pg/log" -w -t 30 -o "-p $pgport -k $work/pg -c listen_addresses=127.0.0.1" start >/dev/null
pg_started=1
sql() { psql -h 127.0.0.1 -p "$pgport" -U roomcast -d "${db:-roomcast}" -qAt -c "$1"; }
db=postgres sql "CREATE DATABASE roomcast" >/dev/null
url="postgres://roomcast@127.0.0.1:$pgport/roomcast"
nports=()
nodes=()
for i in 1 2 3; do
  p=$(freeport)
  mkdir -p "$work/data-n$i"
  "$bin/roomcast" --host 127.0.0.1 --port "$p" --event-loops 1 --data-dir "$work/data-n$i" --cluster "$url" --node-id "n$i" \
    --app "$app:$secret" --connects-per-ip 1000000 --log-level warning ${BENCH_NODE_ARGS:-} >"$work/n$i.log" 2>&1 &
  nodes+=($!)
  pids+=($!)
  nports+=("$p")
done
for i in 0 1 2; do wait_ready "${nports[$i]}" "n$((i + 1))"; done
sleep 1
before=()
for n in "${nodes[@]}"; do before+=("$(kib "$n" VmRSS)"); done
echo "cluster: writing through node 1"
write_all "${nports[0]}"
# Every node has applied the log's head.
head=$(sql "SELECT coalesce(max(position), 0) FROM roomcast_log")
for _ in $(seq 1 600); do
  behind=0
  for port in "${nports[@]}"; do
    a=$(curl -sf "http://127.0.0.1:$port/readyz" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cluster"]["applied"])' 2>/dev/null || echo 0)
    [ "$a" -lt "$head" ] && behind=1
  done
  [ "$behind" = 0 ] && break
  sleep 0.1
done
sleep 3
worst=0
for i in 0 1 2; do
  n=${nodes[$i]}
  after=$(kib "$n" VmRSS)
  peak=$(kib "$n" VmHWM)
  count=$(stored "$work/data-n$((i + 1))/replica.sqlite")
  ratio=$(python3 -c "print(f'{$after / $single_after:.2f}')")
  echo "cluster node $((i + 1)): RSS ${before[$i]} -> $after KiB (peak $peak), $count messages in its replica; ${ratio}x the single node's RSS"
  worst=$(python3 -c "print(max($worst, $after))")
done
echo "bench-replica-memory: single node RSS $single_after KiB with $single_stored messages; the largest cluster node's $worst KiB =" \
  "$(python3 -c "print(f'{$worst / $single_after:.2f}')")x (target <= 1.5x)"
