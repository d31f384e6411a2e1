#!/usr/bin/env bash
# Verifies roomcast's Standard Webhooks signatures with the `standardwebhooks` library from PyPI.
#
#   scripts/webhooks-verify.sh
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-st
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c 'import standardwebhooks' 2>/dev/null || "$venv/bin/pip" install -q standardwebhooks
swift build --product roomcast >/dev/null
"$venv/bin/python" scripts/webhooks_verify.py "$(swift build --show-bin-path)/roomcast"
