#!/usr/bin/env bash
# The container recipe, checked without a Docker engine: builds the release binary with the
# script the image uses (scripts/build-release.sh), checks docker/Dockerfile and
# docker/compose.yaml against it (scripts/docker_check.py: options, environment, ports, the
# scripts, the runtime libraries), then starts it with the image's and the compose service's
# environment (port and data directory moved to free temporary ones) and runs the image's
# HEALTHCHECK command until it passes, and checks the console is served from the installed bundle.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-docker
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q 'PyYAML==6.0.2'
fi
out=$(mktemp -d)
scripts/build-release.sh "$out/install" >/dev/null
bin="$out/install/bin/roomcast"
if ldd "$bin" | grep -E "not found|libswift|libFoundation"; then echo "docker-check: the binary needs libraries the image lacks"; exit 1; fi
# Resolved paths of the libraries the binary names directly.
ldd "$bin" | awk -v needed="$(readelf -d "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')" \
  'BEGIN { n = split(needed, a, " "); for (i = 1; i <= n; i++) want[a[i]] = 1 } ($1 in want) && $3 ~ /^\// { print $3 }' >"$out/needed.txt"
"$bin" --help >"$out/help.txt"
"$venv/bin/python" scripts/docker_check.py docker/Dockerfile docker/compose.yaml "$out/help.txt" "$out/needed.txt" scripts/install-deps.sh >"$out/plan"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
health=$(sed -n 's/^HEALTHCHECK=//p' "$out/plan" | sed "s/127.0.0.1:8080/127.0.0.1:$port/")
mkdir -p "$out/data"
env_args=()
while IFS= read -r line; do
  case "$line" in
    HEALTHCHECK=*) ;;
    ROOMCAST_PORT=*) env_args+=("ROOMCAST_PORT=$port") ;;
    ROOMCAST_DATA_DIR=*) env_args+=("ROOMCAST_DATA_DIR=$out/data") ;;
    ROOMCAST_HOST=*) env_args+=("ROOMCAST_HOST=127.0.0.1") ;;
    *) env_args+=("$line") ;;
  esac
done <"$out/plan"
echo "docker-check: starting the installed binary with ${env_args[*]}"
env -i PATH="$PATH" "${env_args[@]}" "$bin" >"$out/roomcast.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
ok=""
for _ in $(seq 1 100); do
  if sh -c "$health" >/dev/null 2>&1; then ok=1; break; fi
  sleep 0.1
done
[ -n "$ok" ] || { echo "docker-check: the HEALTHCHECK ($health) never passed"; cat "$out/roomcast.log"; exit 1; }
# Read whole, then searched: `curl | grep -q` fails under pipefail whenever grep matches and exits
# before curl has written the rest of the page (curl: (23) Failed writing body).
console=$(curl -fsS "http://127.0.0.1:$port/console/" || true)
case "$console" in
  *"<html"*) ;;
  *) echo "docker-check: the console is not served from the installed bundle"; exit 1 ;;
esac
grep -q "development app" "$out/roomcast.log" || { echo "docker-check: with ROOMCAST_APPS empty the first start should create a development app"; cat "$out/roomcast.log"; exit 1; }
kill -TERM $pid
wait $pid || { echo "docker-check: roomcast did not exit 0 on SIGTERM"; exit 1; }
trap - EXIT
echo "docker-check: Dockerfile and compose.yaml match the binary; it starts, passes its health check and drains"
