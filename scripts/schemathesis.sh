#!/usr/bin/env bash
# Validates the OpenAPI document the live server serves, then fuzzes the REST API with
# schemathesis for a bounded time: no 5xx, every status documented, every body matching its
# schema, undeclared methods answered 405.
#
#   scripts/schemathesis.sh [examples-per-operation] [seconds]   (defaults 25 and 300)
#
# The run is time-boxed by schemathesis itself (--max-time): every operation's coverage cases
# first, then fuzzing and stateful sequences repeat until the seconds are spent, and the run ends
# with its verdict. A slower machine tries fewer cases in the same time rather than running long;
# the outer `timeout` only catches a run that hangs.
set -euo pipefail
cd "$(dirname "$0")/.."
examples=${1:-25}
seconds=${2:-300}
venv=.venv-st
if [ ! -x "$venv/bin/schemathesis" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q 'schemathesis==4.32.5' openapi-spec-validator
fi
validator=$(command -v openapi-spec-validator || echo "$venv/bin/openapi-spec-validator")
[ -x "$validator" ] || "$venv/bin/pip" install -q openapi-spec-validator

swift build --product roomcast >/dev/null
bin="$(swift build --show-bin-path)/roomcast"
export ROOMCAST_APP_KEY=fuzzapp ROOMCAST_APP_SECRET=fuzz-secret-0123456789
. scripts/start-roomcast.sh
start_roomcast "$bin" "$ROOMCAST_APP_KEY:$ROOMCAST_APP_SECRET"
port=$roomcast_port

echo "== openapi-spec-validator: repository file and live document"
"$validator" openapi/roomcast.openapi.json
curl -sf "http://127.0.0.1:$port/openapi.json" | "$validator" -

# Creating or re-pointing webhook endpoints would make the server send traffic to whatever hosts the
# fuzzer invents; those two operations are covered by the end-to-end tests instead.
# Hypothesis's `filter_too_much` health check is about the generator, not the API: for some seeds it
# cannot draw enough room-path cases that pass the room id's pattern and the other parameters'
# constraints at once, and then failed a run that found nothing wrong (CI, 15 room operations). It is
# suppressed; every other check stays.
echo "== schemathesis ($examples examples per operation, $seconds s)"
SCHEMATHESIS_HOOKS=scripts.schemathesis_hooks PYTHONPATH=. timeout $((seconds + 120)) "$venv/bin/schemathesis" run \
  "http://127.0.0.1:$port/openapi.json" --url "http://127.0.0.1:$port" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,unsupported_method \
  --exclude-operation-id createWebhook --exclude-operation-id updateWebhook \
  -n "$examples" --max-time "$seconds" --max-failures 25 --suppress-health-check=filter_too_much --no-color
