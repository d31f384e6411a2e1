#!/usr/bin/env bash
# Runs the end-to-end gateway tests with every WebSocket frame recorded, then checks each frame
# against the published protocol schema (openapi/roomcast.websocket.json) and that the tests
# exercise every op and event it lists.
#
#   scripts/websocket-schema.sh             runs GatewayTests with the frames recorded, then checks
#   scripts/websocket-schema.sh FRAME_LOG   checks frames a test run already recorded
#                                           (ROOMCAST_FRAME_LOG=FRAME_LOG swift test; CI does this
#                                           so the tests run once)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-st
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import jsonschema_rs' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q 'schemathesis==4.32.5'
fi
if [ $# -gt 0 ]; then
  log=$1
  [ -s "$log" ] || { echo "websocket-schema: $log holds no recorded frames"; exit 1; }
else
  log=$(mktemp)
  out=$(mktemp)
  trap 'rm -f "$log" "$out"' EXIT
  # The GatewayTests target only (not ClusterTests.ClusterGatewayTests, which the full run covers);
  # on a failure, what failed is printed.
  if ! ROOMCAST_FRAME_LOG="$log" swift test --filter '^GatewayTests\.' >"$out" 2>&1; then
    grep -E "✘|error:|Caught error|Expectation failed" "$out" | head -40
    echo "websocket-schema: the end-to-end tests failed while recording frames"
    exit 1
  fi
fi
"$venv/bin/python" scripts/websocket-schema.py openapi/roomcast.websocket.json "$log"
