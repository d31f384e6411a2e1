#!/usr/bin/env bash
# The before-send hook's cost (PX-4): the same room messages published over REST by the same
# publishers to the same subscribers, once for an app without a hook and once for an app whose
# hook (a local receiver answering 204 = pass, our own HTTP server) judges every message first —
# both apps on one roomcast, in the same run.
#
#   scripts/bench-beforesend.sh [subscribers]     (default 100)
#
# 1. Throughput: 5,000 messages published as fast as 16 concurrent publishers get answers;
#    messages/s = accepted publishes / publishing time (each answered once delivered durably).
# 2. Latency: 200 publishes/s for 5 s; publish->receive p50/p99 (send time is in the message);
#    the hook's added p99 = hooked p99 - plain p99.
#
# roomcast gets two event loops; the receiver one; the load generator two client loops; all on
# the same two cores. The hooked app fails closed, so a hook failure shows as a publish error.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100}
swift build -c release --product roomcast >/dev/null
swift build -c release --product roomcast-bench >/dev/null
swift build -c release --product roomcast-webhook-bench >/dev/null
bin=$(swift build -c release --show-bin-path)
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rc_port=$(freeport)
work=$(mktemp -d)
mkdir -p "$work/data"

"$bin/roomcast-webhook-bench" receive --port 0 --event-loops 1 >"$work/receiver.log" 2>&1 &
receiver=$!
"$bin/roomcast" --host 127.0.0.1 --port "$rc_port" --event-loops 2 --data-dir "$work/data" \
  --app plain:plain-secret-0123456789 --app hooked:hooked-secret-0123456789 --webhook-allow-private hooked \
  --connects-per-ip 1000000 --log-level warning >"$work/roomcast.log" 2>&1 &
rc=$!
trap 'kill $rc $receiver 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do grep -q "listening on" "$work/receiver.log" && break; sleep 0.05; done
hook_port=$(sed -n 's/.*127.0.0.1:\([0-9]*\)\/hook.*/\1/p' "$work/receiver.log")
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$rc_port/readyz" >/dev/null && break; sleep 0.05; done

results="$work/results"
run() { # app label args...
  local app=$1 label=$2; shift 2
  local hook=()
  [ "$app" = hooked ] && hook=(--before-send-url "http://127.0.0.1:$hook_port/hook")
  local out
  out=$(timeout 300 "$bin/roomcast-bench" fanout --target roomcast --port "$rc_port" --client-loops 2 \
    --app-key "$app" --app-secret "$app-secret-0123456789" "${hook[@]}" "$@" 2>&1) || true
  echo "$out" | sed "s/^/[$app $label] /"
  local pub errors per p50 p99
  pub=$(echo "$out" | sed -n 's/.*published_per_s=\([0-9]*\).*/\1/p')
  errors=$(echo "$out" | sed -n 's/.*publish_errors=\([0-9]*\).*/\1/p')
  per=$(echo "$out" | sed -n 's/.*delivered_per_s=\([0-9]*\).*/\1/p')
  read -r p50 p99 < <(echo "$out" | sed -n 's/.*p50=\([0-9.]*\) p99=\([0-9.]*\).*/\1 \2/p')
  echo "$app $label ${pub:-0} ${errors:-nan} ${per:-0} ${p50:-nan} ${p99:-nan}" >>"$results"
}

for app in plain hooked; do
  run $app throughput --subscribers "$n" --rate 0 --messages 5000 --publishers 16 --pipeline 1 --room "tp-$app"
  run $app latency --subscribers "$n" --rate 200 --duration 5 --publishers 4 --pipeline 1 --room "lat-$app"
done

python3 - "$results" "$n" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    app, label, pub, errors, per, p50, p99 = line.split()
    rows[(app, label)] = (int(pub), errors, int(per), p50, p99)
n = sys.argv[2]
(pp, pe, pd, _, _), (hp, he, hd, _, _) = rows[("plain", "throughput")], rows[("hooked", "throughput")]
print(f"bench-beforesend: throughput subscribers={n}: without hook {pp:,} msg/s, through the hook {hp:,} msg/s "
      f"= {hp / pp if pp else 0:.2f}x (publish errors {pe} / {he}; deliveries/s {pd:,} / {hd:,})")
(_, pe, _, p50p, p99p), (_, he, _, p50h, p99h) = rows[("plain", "latency")], rows[("hooked", "latency")]
try:
    added = f"{float(p99h) - float(p99p):.2f}"
except ValueError:
    added = "nan"
print(f"bench-beforesend: latency 200 msg/s subscribers={n}: p50 {p50p} -> {p50h} ms, p99 {p99p} -> {p99h} ms; "
      f"the hook adds {added} ms at p99 (publish errors {pe} / {he})")
PY
