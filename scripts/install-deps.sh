#!/usr/bin/env bash
# The Debian packages roomcast needs, declared once: CI (.ci/run), the README and
# docker/Dockerfile all install through this script.
#
#   scripts/install-deps.sh build     # to build: headers (libcurl, zlib, SQLite, libpq) and pkg-config
#   scripts/install-deps.sh source    # to build and run from a checkout (README): build + curl (the
#                                     # README's signed calls) + Chart.js
#   scripts/install-deps.sh test      # to run the tests (README): source + PostgreSQL 15 (cluster tests)
#   scripts/install-deps.sh runtime   # to run a release binary (scripts/build-release.sh links the
#                                     # Swift runtime statically): libcurl, zlib, SQLite, libpq, CA
#                                     # certificates, curl (the health check), Chart.js (console)
#   scripts/install-deps.sh ci        # test + what the checks use: python3-venv, Chromium, chromedriver,
#                                     # nftables (scripts/chaos-cluster.sh's partitions)
#
# Works as root (a container) or with sudo. `--list MODE` prints the packages instead (.ci/run
# installs them itself, so its log shows every package).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi
build=(libcurl4-openssl-dev zlib1g-dev libsqlite3-dev libpq-dev pkg-config)
runtime=(libcurl4 zlib1g libsqlite3-0 libpq5 ca-certificates curl libjs-chart.js)
list=""
if [ "${1:-}" = --list ]; then list=1; shift; fi
case "${1:-}" in
  build) packages=("${build[@]}"); extra=(--no-install-recommends) ;;
  source) packages=("${build[@]}" curl libjs-chart.js); extra=() ;;
  test) packages=("${build[@]}" curl libjs-chart.js postgresql); extra=() ;;
  runtime) packages=("${runtime[@]}"); extra=(--no-install-recommends) ;;
  ci) packages=("${build[@]}" curl python3-venv libjs-chart.js postgresql chromium chromium-driver nftables iproute2); extra=() ;;
  *) echo "usage: $0 build|source|test|runtime|ci" >&2; exit 2 ;;
esac
if [ -n "$list" ]; then echo "${packages[@]}"; exit 0; fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${extra[@]}" "${packages[@]}" >/dev/null
