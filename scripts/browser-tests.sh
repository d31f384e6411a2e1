#!/usr/bin/env bash
# The browser side in a real browser (BX-3, BX-4, TR-3): headless Chromium (Debian's chromium and
# chromium-driver) driven by Selenium (PyPI) against a live roomcast — the client library imported
# by pages on another origin, reconnect and resume across a kill -9, token refresh, the README
# example, the fallback WebSocket → SSE → long-poll and back through a local proxy of our own
# that refuses upgrades, breaks event streams and cuts streams mid-event (TR-3,
# scripts/browser_proxy.py, 127.0.0.1 only), and the console (sign-in, rooms, live events,
# moderation, dead-letter replay), with screenshots of the console in .build/screenshots/. Also
# the client library's unit tests (node --test, no npm packages).
#
#   scripts/browser-tests.sh                  (builds roomcast first)
#   ROOMCAST_BIN=path scripts/browser-tests.sh  (uses an already built binary)
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== client library unit tests (node --test)"
node --test clients/js/test/

for tool in chromium chromedriver; do
  command -v $tool >/dev/null || { echo "$tool is missing: apt-get install -y chromium chromium-driver"; exit 1; }
done
venv=.venv-browser
if ! "$venv/bin/python" -c 'import selenium' 2>/dev/null; then
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q 'selenium==4.27.1'
fi
if [ -n "${ROOMCAST_BIN:-}" ]; then
  bin=$ROOMCAST_BIN
else
  swift build --product roomcast >/dev/null
  bin="$(swift build --show-bin-path)/roomcast"
fi
echo "== browser checks (headless $(chromium --version 2>/dev/null | head -1))"
timeout 300 "$venv/bin/python" scripts/browser_tests.py --bin "$bin" --screenshots .build/screenshots
