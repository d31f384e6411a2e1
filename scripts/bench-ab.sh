#!/usr/bin/env bash
# Two builds, alternated in one run: each benchmark runs on checkout A, then B, then A, then B …
# (ROUNDS pairs), each checkout with its own scripts and its own release build, so a drift in the
# machine's speed (other tenants, other builds) falls on both alike. Used for "before and after"
# (issue 26's must-show): bench-fanout.sh, chat-bench, bench-http.sh, bench-cluster.sh.
#
#   scripts/bench-ab.sh A_DIR B_DIR [benchmarks] [rounds]
#       benchmarks: comma-separated of fanout,chat,http,cluster (default all); rounds: pairs (2)
#
# A_DIR and B_DIR are checkouts (git worktrees) built with `swift build -c release`; this script
# builds nothing itself (each benchmark script runs its own `swift build`, a no-op when built).
# The machine's load average is recorded before and after every run. Logs stay in the printed
# directory; the summary prints, per figure, every run of A and of B, the medians, B/A of the
# medians and of each pair, and whether the two builds' ranges overlap (the runs of one build
# are the noise the difference is judged against).
#
# Environment passed to every run alike, e.g. ROOMCAST_FANOUT_LATENCY_BUDGET (a build that
# lacks a setting ignores its variable).
set -euo pipefail
a=$(cd "${1:?usage: scripts/bench-ab.sh A_DIR B_DIR [benchmarks] [rounds]}" && pwd)
b=$(cd "${2:?usage: scripts/bench-ab.sh A_DIR B_DIR [benchmarks] [rounds]}" && pwd)
benches=${3:-fanout,chat,http,cluster}
rounds=${4:-2}
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d /tmp/bench-ab.XXXXXX)
echo "bench-ab: A=$a ($(git -C "$a" rev-parse --short HEAD)) B=$b ($(git -C "$b" rev-parse --short HEAD)); logs in $out"

run() { # which dir bench round
  local which=$1 dir=$2 bench=$3 round=$4 log
  log="$out/$bench-$which-$round.log"
  {
    echo "# $which $(git -C "$dir" rev-parse --short HEAD) $bench round $round"
    echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg) at $(date +%T)"
  } >"$log"
  local t0=$SECONDS
  case $bench in
    # One paced round per run: the pairs are the rounds here (and a run stays within its 900 s).
    fanout) (cd "$dir" && BENCH_PACED_ROUNDS=1 timeout -k 10 900 scripts/bench-fanout.sh) >>"$log" 2>&1 || echo "# exit $?" >>"$log" ;;
    chat) (cd "$dir" && timeout -k 10 300 "$(swift build -c release --show-bin-path)/chat-bench") >>"$log" 2>&1 || echo "# exit $?" >>"$log" ;;
    http) (cd "$dir" && timeout -k 10 600 scripts/bench-http.sh) >>"$log" 2>&1 || echo "# exit $?" >>"$log" ;;
    cluster) (cd "$dir" && scripts/bench-cluster.sh) >>"$log" 2>&1 || echo "# exit $?" >>"$log" ;;
    *) echo "bench-ab: unknown benchmark $bench"; exit 2 ;;
  esac
  echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg) at $(date +%T), $((SECONDS - t0)) s" >>"$log"
  echo "bench-ab: $bench $which round $round: $((SECONDS - t0)) s, load $(sed -n 's/^# load before: \([^ ]*\).*/\1/p' "$log") -> $(cut -d' ' -f1 /proc/loadavg)"
}

for bench in ${benches//,/ }; do
  for r in $(seq 1 "$rounds"); do
    run A "$a" "$bench" "$r"
    run B "$b" "$bench" "$r"
  done
done

python3 "$here/bench_ab_summary.py" "$out"
