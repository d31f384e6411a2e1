#!/usr/bin/env bash
# Rewrites the published documents in openapi/ from the code (the tests keep them current:
# Tests/GatewayTests/DocumentTests.swift). Builds the debug binary if needed.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --product roomcast >/dev/null
bin=$(swift build --show-bin-path)/roomcast
"$bin" --print-openapi > openapi/roomcast.openapi.json
"$bin" --print-error-table > openapi/errors.md
"$bin" --print-websocket-schema > openapi/roomcast.websocket.json
"$bin" --print-websocket-doc > openapi/websocket.md
"$bin" --print-sse-doc > openapi/sse.md
git --no-pager diff --stat -- openapi/
