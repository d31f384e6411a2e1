#!/usr/bin/env bash
# The in-process and unit tests alone (about 25 s on two cores): every suite except those that
# start the built binaries over real sockets or a private PostgreSQL. `swift test` runs them all
# (about 3 minutes). Extra arguments go to `swift test` (e.g. --skip-build, --filter).
set -euo pipefail
cd "$(dirname "$0")/.."
# Suites that start processes: the server's black-box tests, the cluster's (PostgreSQL and three
# nodes), and the gateway's end-to-end ones (smoke, webhooks and delivery over real sockets,
# protocol hardening against the binary).
exec swift test --skip 'ServerTests\.BlackBox|ClusterTests\.(ClusterGateway|ClusterLog|ClusterSnapshot|ReplayAcrossProcesses)|GatewayTests\.(ClusterScenario|Smoke|Webhook|Delivery|Hardening)Tests' "$@"
