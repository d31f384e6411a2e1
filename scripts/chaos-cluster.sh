#!/usr/bin/env bash
# Fault injection for the cluster (issue 31, CL-7, CL-8): PostgreSQL, the TCP proxy in front of it
# and three roomcast nodes, each in its own network namespace, the clients, the app servers'
# webhook receiver and the driver in another; faults from a seeded schedule; the recorded history
# checked by scripts/chaos_check.py. RELIABILITY.md lists the faults, the guarantees and the runs.
#
#   scripts/chaos-cluster.sh [--fault-seconds S] [--faults kind,kind] [--broken ack-on-send] SEED [SEED...]
#
# Needs root (ip netns, veth, nft: Debian's iproute2 and nftables), PostgreSQL 15's server
# binaries and a built roomcast (ROOMCAST_BIN, default: `swift build`'s debug binary, built if
# missing). Each seed gets its own namespaces (ROOMCAST_CHAOS_NS, default rcc<pid>-*), its own
# /24 of 10.213.0.0/16 on a bridge inside its own hub namespace (nothing is added to the host's
# network), its own PostgreSQL data directory and ports inside those namespaces. The exit trap
# kills the processes inside those namespaces (ours: nothing else runs there) and the pids the
# driver recorded, stops PostgreSQL and deletes the namespaces. Every seed is bounded by
# `timeout` (CHAOS_SEED_TIMEOUT, 240 s) and the whole script by CHAOS_TOTAL_TIMEOUT (1800 s).
# A seed's work directory (history.jsonl, every process's log) is kept when it fails.
#
# Exit status: 0 when every seed's history passed the checker; 1 otherwise (the failing seeds are
# printed, each reproducible with `scripts/chaos-cluster.sh SEED`).
set -euo pipefail
if [ -z "${CHAOS_CLUSTER_BOUNDED:-}" ]; then
  CHAOS_CLUSTER_BOUNDED=1 exec timeout -k 20 "${CHAOS_TOTAL_TIMEOUT:-1800}" "$0" "$@"
fi
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "chaos-cluster: needs root (network namespaces)"; exit 1; }
command -v nft >/dev/null || { echo "chaos-cluster: nft not found (apt-get install -y nftables)"; exit 1; }
pgbin=${PG_BIN:-/usr/lib/postgresql/15/bin}
[ -x "$pgbin/postgres" ] || { echo "chaos-cluster: PostgreSQL 15 not found in $pgbin"; exit 1; }

extra=()
seeds=()
while [ $# -gt 0 ]; do
  case "$1" in
    --fault-seconds|--faults|--settle-seconds|--retry-seconds|--node-timeout|--broken) extra+=("$1" "$2"); shift 2 ;;
    *) seeds+=("$1"); shift ;;
  esac
done
[ ${#seeds[@]} -gt 0 ] || seeds=(1)

bin=${ROOMCAST_BIN:-}
if [ -z "$bin" ]; then
  bin="$(swift build --show-bin-path)/roomcast"
  [ -x "$bin" ] || swift build --product roomcast >/dev/null
fi
root=$(mktemp -d /tmp/roomcast-chaos.XXXXXX)
chmod 755 "$root"
# A private copy: a concurrent build cannot swap the binary mid-run.
cp "$bin" "$root/roomcast"
bin=$root/roomcast
prefix=${ROOMCAST_CHAOS_NS:-rcc$$}
names=(hub pg n1 n2 n3 cl)
current=""

teardown() { # prefix workdir: everything one seed made
  local p=$1 work=$2 n pid
  for n in "${names[@]}"; do
    for pid in $(ip netns pids "$p-$n" 2>/dev/null); do kill -CONT "$pid" 2>/dev/null || true; kill -KILL "$pid" 2>/dev/null || true; done
  done
  if [ -f "$work/pids" ]; then
    while read -r pid; do
      # only a pid the driver started, and only while it is still in one of our namespaces
      for n in "${names[@]}"; do
        if ip netns identify "$pid" 2>/dev/null | grep -qx "$p-$n"; then kill -KILL "$pid" 2>/dev/null || true; fi
      done
    done <"$work/pids"
  fi
  sleep 0.5
  for n in "${names[@]}"; do ip netns del "$p-$n" 2>/dev/null || true; done
}
cleanup() {
  trap - EXIT INT TERM
  [ -n "$current" ] && teardown $current
  rm -f "$root/roomcast"
}
trap cleanup EXIT
trap 'echo "chaos-cluster: interrupted or out of time; cleaning up"; exit 130' INT TERM

setup() { # prefix subnet: the hub's bridge and one veth pair per namespace
  local p=$1 net=$2 n i=0
  ip netns add "$p-hub"
  ip -n "$p-hub" link set lo up
  ip -n "$p-hub" link add br0 type bridge
  ip -n "$p-hub" link set br0 up
  declare -A host=([pg]=1 [n1]=11 [n2]=12 [n3]=13 [cl]=100)
  for n in pg n1 n2 n3 cl; do
    i=$((i + 1))
    ip netns add "$p-$n"
    ip -n "$p-$n" link set lo up
    ip link add "rcc$$x$i" netns "$p-$n" type veth peer name "h$i" netns "$p-hub"
    ip -n "$p-$n" link set "rcc$$x$i" name eth0
    ip -n "$p-$n" addr add "$net.${host[$n]}/24" dev eth0
    ip -n "$p-$n" link set eth0 up
    ip -n "$p-hub" link set "h$i" master br0
    ip -n "$p-hub" link set "h$i" up
  done
}

failed=()
passed=0
for seed in "${seeds[@]}"; do
  work="$root/seed-$seed"
  mkdir -p "$work"
  p="$prefix-$seed"
  net="10.213.$(( (seed * 37 + $$) % 250 + 1 ))"
  current="$p $work"
  setup "$p" "$net"
  echo "== chaos-cluster: seed $seed (namespaces $p-*, $net.0/24, work $work)"
  started=$SECONDS
  set +e
  SWIFT_BACKTRACE=enable=no timeout -k 10 "${CHAOS_SEED_TIMEOUT:-240}" ip netns exec "$p-cl" \
    python3 scripts/chaos_cluster.py --seed "$seed" --work "$work" --bin "$bin" --net "$net" --ns "$p" --pg-bin "$pgbin" "${extra[@]}"
  rc=$?
  set -e
  teardown $current
  current=""
  echo "== chaos-cluster: seed $seed: $([ $rc = 0 ] && echo passed || echo "FAILED (status $rc)") in $((SECONDS - started)) s"
  if [ $rc = 0 ]; then
    passed=$((passed + 1))
    rm -rf "$work"
  else
    failed+=("$seed")
  fi
done
echo "chaos-cluster: ${#seeds[@]} seeds, $passed passed${failed:+, failed: ${failed[*]} (reproduce: scripts/chaos-cluster.sh SEED; histories kept in $root)}"
[ ${#failed[@]} = 0 ] || exit 1
rm -rf "$root"
