#!/usr/bin/env bash
# OP-4 (CI): starts the built roomcast on a free port with a scratch data directory, scrapes
# GET /metrics, and checks that every metric name docker/grafana-dashboard.json and
# docker/prometheus-alerts.yaml query is one it exports (scripts/check_dashboards.py).
#   scripts/check-dashboards.sh [path/to/roomcast]     # default: .build/debug/roomcast (built if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-.build/debug/roomcast}
[ -x "$bin" ] || swift build --product roomcast >/dev/null
scratch=$(mktemp -d)
pid=""
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$scratch"
}
trap cleanup EXIT
"$bin" --port 0 --data-dir "$scratch/data" --app check:check-secret-0123 --log-level warning >"$scratch/out" 2>&1 &
pid=$!
port=""
for _ in $(seq 1 100); do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$scratch/out" | head -1)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { cat "$scratch/out"; echo "roomcast did not start" >&2; exit 1; }
curl -sf "http://127.0.0.1:$port/metrics" >"$scratch/metrics"
python3 scripts/check_dashboards.py "$scratch/metrics" docker/grafana-dashboard.json docker/prometheus-alerts.yaml
