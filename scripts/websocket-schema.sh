#!/usr/bin/env bash
# Runs the end-to-end gateway tests with every WebSocket frame recorded, then checks each frame
# against the published protocol schema (openapi/roomcast.websocket.json) and that the tests
# exercise every op and event it lists.
#
#   scripts/websocket-schema.sh
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-st
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import jsonschema_rs' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q 'schemathesis==4.32.5'
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
ROOMCAST_FRAME_LOG="$log" swift test --filter GatewayTests >/dev/null
"$venv/bin/python" scripts/websocket-schema.py openapi/roomcast.websocket.json "$log"
