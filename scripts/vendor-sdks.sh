#!/usr/bin/env bash
# Contract check for the vendor surfaces (SPEC §8 VC-1, VC-3, VC-4; §14 QS-1, QS-4, QS-6; §16 MO-1, MO-2, MO-4): drives a live roomcast with the
# vendors' real Python server SDKs from PyPI (RongCloud rc-server-sdk, Nexconn ncsdk), pointed at it
# by base URL only, exactly as an app server switching over would. See scripts/vendor_sdks.py.
#
#   scripts/vendor-sdks.sh                (builds roomcast first)
#   ROOMCAST_BIN=path scripts/vendor-sdks.sh   (uses an already built binary, no build)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-sdk
# rc-server-sdk imports jinja2 without declaring it; the wheel needs it installed alongside.
if ! "$venv/bin/python" -c 'import rongcloud.rongcloud, ncsdk' 2>/dev/null; then
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q 'rc-server-sdk==3.2.0' 'jinja2==3.1.6' 'ncsdk==0.1.2'
fi

if [ -n "${ROOMCAST_BIN:-}" ]; then
  bin=$ROOMCAST_BIN
else
  swift build --product roomcast >/dev/null
  bin="$(swift build --show-bin-path)/roomcast"
fi
key=sdkapp
secret=sdk-secret-0123456789
. scripts/start-roomcast.sh
start_roomcast "$bin" "$key:$secret"
port=$roomcast_port

echo "== vendor SDKs (rc-server-sdk 3.2.0, ncsdk 0.1.2) against roomcast on port $port"
timeout 120 "$venv/bin/python" scripts/vendor_sdks.py --port "$port" --key "$key" --secret "$secret"
