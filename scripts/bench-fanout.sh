#!/usr/bin/env bash
# Fan-out: roomcast against nginx+nchan in the same run, same subscribers, same publishers.
#
#   scripts/bench-fanout.sh [--payload-bytes N] [subscribers]     (default 10000 subscribers; payload:
#                                                                  the send time alone)
#
# 1. Throughput: N subscribers in one room; 300 messages published as fast as P concurrent HTTP
#    publishers get answers (P = 4 and 16); delivered messages/s = deliveries / (last delivery -
#    first publish). Target: roomcast >= 2x nchan at 10,000 subscribers.
# 2. Latency: publishes at a fixed rate for 3 s (BENCH_PACED_SECONDS); publish->receive p50/p99/p99.9 (send time is in
#    the message). Target: p99 < 20 ms. Run at 1,000 subscribers x 100/s, N x 10/s and N x 100/s
#    (the last asks for N x 100 deliveries a second: past what two cores deliver at 10,000).
#    Each paced case runs BENCH_PACED_ROUNDS times (default 3), its targets one after the other
#    in each round: a ratio to nchan is taken within a round, and the summary prints the median
#    of the rounds' ratios with every round's beside it (nchan's CPU per delivery moves by a
#    fifth or more from one run to the next; one pair is not a measurement). Latencies and rates
#    are the rounds' medians.
#
# Cost: each throughput run also reports the server's CPU-seconds (user + system, from
# /proc/PID/stat: roomcast's process; nginx's master and workers, sampled by roomcast-bench
# --server-pids) per million deliveries, over the whole run (the subscribers' connect and join
# included) and over the publish phase alone (first publish to last delivery), and the wire bytes per delivery (WebSocket payload and header) the subscribers received; the summary
# prints roomcast/nchan ratios of both. --payload-bytes pads every published message to N bytes
# (the send time, then padding) so the two servers carry payloads of the same size.
#
# Encodings (TR-5): roomcast runs twice per case, its subscribers asking for the JSON encoding
# (target "roomcast") and for the compact one (target "roomcast-compact", subprotocol
# roomcast.compact.v1); the summary prints wire bytes and server CPU per delivery of both, and
# each against nchan's in the same run, and for the paced cases in the same round (target for
# the paced cases: compact <= 0.75x nchan's CPU per delivery, the rounds' median; wire bytes <= 120
# per delivery of the short message).
#
# Write delay (--write-delay, TR-5): roomcast runs with its default write delay (30 ms: a loop
# that wrote room events holds the next normal ones up to that long and writes each connection's
# together), or BENCH_WRITE_DELAY milliseconds when set. The paced cases also run against a second
# roomcast with --write-delay 0 (target "roomcast-compact-nodelay", compact subscribers), every
# event written before its loop sleeps: the summary prints its CPU per delivery against nchan's
# and its latency beside the others'.
#
# roomcast and nchan both get two workers (event loops); the load generator (roomcast-bench,
# our own reactor, two client loops) shares the same two cores.
#
# Same work for both servers: roomcast-bench sets the app's room budget (roomMessagesPerSecond) to
# its maximum, and roomcast runs with its fan-out latency budget (QS-2, which refuses normal
# messages to a room while its loops are more than 100 ms behind) lifted to 60 s
# (ROOMCAST_FANOUT_LATENCY_BUDGET, the variable a build without the budget ignores; set it to 100
# to measure with the default), so every message published is delivered, as with nchan;
# scripts/bench-overload.sh measures the budgets. Publish errors (a 429 is one) are printed per case.
set -euo pipefail
export ROOMCAST_FANOUT_LATENCY_BUDGET=${ROOMCAST_FANOUT_LATENCY_BUDGET:-60000}
cd "$(dirname "$0")/.."
payload=0
if [ "${1:-}" = --payload-bytes ]; then payload=$2; shift 2; fi
n=${1:-10000}
command -v nginx >/dev/null || { echo "nginx is not installed (apt-get install -y nginx libnginx-mod-nchan)"; exit 1; }
[ -f /usr/lib/nginx/modules/ngx_nchan_module.so ] || { echo "nchan is not installed (apt-get install -y libnginx-mod-nchan)"; exit 1; }

swift build -c release --product roomcast >/dev/null
swift build -c release --product roomcast-bench >/dev/null
bin=$(swift build -c release --show-bin-path)
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rc_port=$(freeport)
ng_port=$(freeport)
work=$(mktemp -d)
mkdir -p "$work/nginx/logs" "$work/nginx/tmp" "$work/data"
sed "s/__PORT__/$ng_port/" scripts/nginx-nchan.conf >"$work/nginx/nginx.conf"

"$bin/roomcast" --host 127.0.0.1 --port "$rc_port" --event-loops 2 --data-dir "$work/data" \
  ${BENCH_WRITE_DELAY:+--write-delay "$BENCH_WRITE_DELAY"} \
  --app bench:bench-secret-0123456789 --connects-per-ip 1000000 --log-level warning >"$work/roomcast.log" 2>&1 &
rc=$!
write_delay=${BENCH_WRITE_DELAY:-default}
rcd_port=$(freeport)
mkdir -p "$work/data-nodelay"
"$bin/roomcast" --host 127.0.0.1 --port "$rcd_port" --event-loops 2 --data-dir "$work/data-nodelay" --write-delay 0 \
  --app bench:bench-secret-0123456789 --connects-per-ip 1000000 --log-level warning >"$work/roomcast-nodelay.log" 2>&1 &
rcd=$!
nginx -p "$work/nginx" -c nginx.conf
trap 'kill $rc $rcd 2>/dev/null || true; nginx -p "$work/nginx" -c nginx.conf -s stop 2>/dev/null || true' EXIT
for port in "$rc_port" "$rcd_port"; do
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.05; done
done

results="$work/results"
# The server's processes: roomcast's, or nginx's master and workers (roomcast-bench --server-pids
# reads their CPU time).
server_pids() { # target
  if [ "$1" = roomcast-compact-nodelay ]; then echo "$rcd"; elif [ "$1" != nchan ]; then echo "$rc"; else local m; m=$(cat "$work/nginx/nginx.pid"); echo "$m $(pgrep -P "$m" | tr '\n' ' ')"; fi
}
run() { # target port label args...
  local target=$1 port=$2 label=$3; shift 3
  local out pids
  pids=$(server_pids "$target")
  local as=$target encoding=()
  if [ "$target" = roomcast-compact ] || [ "$target" = roomcast-compact-nodelay ]; then as=roomcast; encoding=(--encoding compact); fi
  out=$(timeout 300 "$bin/roomcast-bench" fanout --target "$as" --port "$port" --client-loops 2 --payload-bytes "$payload" \
    --server-pids "$(echo $pids | tr ' ' ',')" "${encoding[@]}" "$@" 2>&1) || true
  echo "$out" | sed "s/^/[$target $label${round:+ round $round}] /"
  local per p50 p99 p999 delivered wire runcpu pubcpu errors
  per=$(echo "$out" | sed -n 's/.*delivered_per_s=\([0-9]*\).*/\1/p')
  errors=$(echo "$out" | sed -n 's/.*publish_errors=\([0-9]*\).*/\1/p')
  delivered=$(echo "$out" | sed -n 's/^fanout: delivered=\([0-9]*\)\/.*/\1/p')
  wire=$(echo "$out" | sed -n 's/.*wire_bytes_per_delivery=\([0-9]*\).*/\1/p')
  # Anchored: the load generator's own line (load_generator_run_cpu_s=) must not match too.
  runcpu=$(echo "$out" | sed -n 's/^fanout: run_cpu_s=\([0-9.]*\).*/\1/p')
  pubcpu=$(echo "$out" | sed -n 's/.*publish_cpu_s=\([0-9.]*\).*/\1/p')
  read -r p50 p99 p999 < <(echo "$out" | sed -n 's/.*p50=\([0-9.]*\) p99=\([0-9.]*\) p99.9=\([0-9.]*\).*/\1 \2 \3/p')
  echo "$target $label ${per:-0} ${p50:-nan} ${p99:-nan} ${p999:-nan} ${delivered:-0} ${wire:-0} ${runcpu:-0} ${pubcpu:-0} ${errors:-nan} ${round:-1}" >>"$results"
}

# BENCH_TARGETS / BENCH_CASES narrow a run while iterating (the summary needs nchan and a roomcast
# target): BENCH_CASES=throughput runs the throughput cases alone, BENCH_CASES=paced the paced
# cases 1,000 x 100/s and N x 10/s alone.
targets=${BENCH_TARGETS:-roomcast roomcast-compact nchan}
paced_targets=${BENCH_TARGETS:-roomcast roomcast-compact roomcast-compact-nodelay nchan}
portof() { case $1 in nchan) echo "$ng_port" ;; roomcast-compact-nodelay) echo "$rcd_port" ;; *) echo "$rc_port" ;; esac; }
cases=${BENCH_CASES:-all}
for p in 4 16; do
  [ "$cases" = paced ] && break
  for t in $targets; do
    run $t "$(portof $t)" "throughput-p$p" --subscribers "$n" --rate 0 --messages 300 --publishers "$p" --pipeline 1 --room "tp$p-$t"
  done
done
[ "${BENCH_CASES:-all}" = throughput ] && { cat "$results"; exit 0; }
paced=("1000 100" "$n 10" "$n 100")
[ "$cases" = paced ] && paced=("1000 100" "$n 10")
rounds=${BENCH_PACED_ROUNDS:-3}
for c in "${paced[@]}"; do
  read -r subs rate <<<"$c"
  for round in $(seq 1 "$rounds"); do
    for t in $paced_targets; do
      run $t "$(portof $t)" "latency-$subs-$rate" --subscribers "$subs" --rate "$rate" --duration "${BENCH_PACED_SECONDS:-3}" --publishers 4 --pipeline 1 --room "lat$subs-$rate-$t-r$round"
    done
  done
done
round=

python3 - "$results" "$n" "$write_delay" <<'PY'
import statistics, sys
div = lambda x, y: x / y if y else float("nan")
# rows[(target, label)]: one tuple per run, in round order (the throughput cases run once).
rows = {}
for line in open(sys.argv[1]):
    t, label, per, p50, p99, p999, delivered, wire, cpu, pubcpu, errors, rnd = line.split()
    rows.setdefault((t, label), {})[int(rnd)] = (int(per), p50, p99, p999, int(delivered), int(wire), float(cpu), float(pubcpu), errors)
n = sys.argv[2]
first = lambda t, label: next(iter(rows[(t, label)].values()))
for label in ("throughput-p4", "throughput-p16"):
    if ("roomcast", label) not in rows or ("nchan", label) not in rows:
        continue
    r, g = first("roomcast", label)[0], first("nchan", label)[0]
    ratio = r / g if g else float("inf")
    print(f"bench-fanout: {label} subscribers={n}: roomcast {r:,} msg/s, nchan {g:,} msg/s, ratio {ratio:.2f}x (target >= 2x);"
          f" publish errors roomcast {first('roomcast', label)[8]}, nchan {first('nchan', label)[8]}")
    cost, pub = {}, {}
    for t in ("roomcast", "nchan"):
        _, _, _, _, delivered, wire, cpu, pubcpu, _ = first(t, label)
        cost[t] = cpu / delivered * 1e6 if delivered else float("nan")
        pub[t] = pubcpu / delivered * 1e6 if delivered else float("nan")
        print(f"bench-fanout: {label} {t}: {cpu:.2f} server CPU-s for {delivered:,} deliveries = {cost[t]:.2f} CPU-s per million deliveries"
              f" (whole run, subscribers' connect and join included); publish phase alone {pubcpu:.2f} CPU-s = {pub[t]:.2f} per million;"
              f" {wire} wire bytes per delivery")
    print(f"bench-fanout: {label} CPU per delivery roomcast/nchan = {div(cost['roomcast'], cost['nchan']):.2f}x whole run,"
          f" {div(pub['roomcast'], pub['nchan']):.2f}x publish phase")
def per_delivery(run):
    _, _, _, _, delivered, wire, cpu, pubcpu, _ = run
    return (cpu / delivered * 1e6 if delivered else float("nan"), pubcpu / delivered * 1e6 if delivered else float("nan"), wire, delivered)
fmt = lambda xs: ", ".join(f"{x:.2f}" for x in xs)
def median(xs):
    # Over the rounds that measured something; a failed round (nan) is counted, not sorted in.
    xs = list(xs)
    ok = [x for x in xs if x == x]
    return statistics.median(ok) if ok else float("nan")
def failed(xs):
    bad = sum(1 for x in xs if x != x)
    return f", {bad} failed" if bad else ""
# TR-5: the two encodings, each against nchan in the same round (whole run and publish phase);
# the median of the rounds' ratios, every round's beside it.
for label in dict.fromkeys(("throughput-p4", "throughput-p16", "latency-1000-100", f"latency-{n}-10", f"latency-{n}-100")):
    if ("roomcast-compact", label) not in rows or ("nchan", label) not in rows:
        continue
    nchan = rows[("nchan", label)]
    for t in [x for x in ("roomcast", "roomcast-compact", "roomcast-compact-nodelay") if (x, label) in rows]:
        paired = [(rows[(t, label)][k], nchan[k]) for k in sorted(rows[(t, label)]) if k in nchan]
        costs = [(per_delivery(a), per_delivery(b)) for a, b in paired]
        run_ratios = [div(a[0], b[0]) for a, b in costs]
        pub_ratios = [div(a[1], b[1]) for a, b in costs]
        wire, nwire = costs[0][0][2], costs[0][1][2]
        delay = "" if sys.argv[3] == "default" else f" --write-delay {sys.argv[3]}"
        enc = {"roomcast": f"json{delay}", "roomcast-compact": f"compact{delay}"}.get(t, "compact --write-delay 0")
        rounds = f" (median of {len(costs)} rounds: {fmt(pub_ratios)}{failed(pub_ratios)})" if len(costs) > 1 else ""
        print(f"bench-fanout: {label} encoding={enc}: {wire} wire bytes per delivery (nchan {nwire});"
              f" server CPU per million deliveries {median(a[0] for a, _ in costs):.2f} whole run,"
              f" {median(a[1] for a, _ in costs):.2f} publish phase (nchan {fmt(b[1] for _, b in costs)});"
              f" vs nchan {median(run_ratios):.2f}x whole run, {median(pub_ratios):.2f}x publish phase{rounds};"
              f" delivered {sum(a[3] for a, _ in costs):,}" + (f" in {len(costs)} rounds" if len(costs) > 1 else ""))
for label in dict.fromkeys(("latency-1000-100", f"latency-{n}-10", f"latency-{n}-100")):
    if ("nchan", label) not in rows:
        continue
    rate = label.rsplit("-", 1)[1]
    for t in [x for x in ("roomcast", "roomcast-compact", "roomcast-compact-nodelay", "nchan") if (x, label) in rows]:
        runs = list(rows[(t, label)].values())
        med = lambda i: median(float(r[i]) for r in runs)
        per = med(0)
        errors = "nan" if any(r[8] == "nan" for r in runs) else sum(int(r[8]) for r in runs)
        print(f"bench-fanout: {label} {rate} pub/s {t}: delivered {per if per != per else int(per):,} msg/s p50={med(1):.2f} ms p99={med(2):.2f} ms p99.9={med(3):.2f} ms (target p99 < 20 ms);"
              f" publish errors {errors}" + (f" (medians of {len(runs)} rounds{failed([float(r[2]) for r in runs])})" if len(runs) > 1 else ""))
PY
