#!/usr/bin/env bash
# Runs the Autobahn|Testsuite fuzzingclient against roomcast-echo and fails if any case FAILED.
#
#   scripts/autobahn.sh                      # every case (12.* and 13.* take ~10 minutes)
#   scripts/autobahn.sh '1.*' '2.*' '10.*'    # selected cases (fnmatch patterns, as wstest takes them)
#
# Environment:
#   AUTOBAHN_STRICT=1      also fail on NON-STRICT cases
#   AUTOBAHN_REQUIRE=1     fail (instead of skipping) when CPython 2.7 from pyenv is missing
#   ROOMCAST_ECHO_BIN=...  the echo binary to test (default: build it, debug)
#   AUTOBAHN_EXCLUDE=...   space-separated case patterns to exclude
#
# wstest exits 0 even when cases fail, so the verdict comes from reports/servers/index.json.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

venv="$root/.venv-ab2"
if [ ! -x "$venv/bin/wstest" ]; then
  py27=""
  if command -v pyenv >/dev/null 2>&1 && [ -x "$(pyenv root)/versions/2.7.18/bin/python" ]; then
    py27="$(pyenv root)/versions/2.7.18/bin/python"
  fi
  if [ -z "$py27" ]; then
    if [ "${AUTOBAHN_REQUIRE:-0}" = 1 ]; then echo "autobahn: CPython 2.7 (pyenv) not found" >&2; exit 1; fi
    echo "autobahn: skipped (CPython 2.7 from pyenv is not installed; the suite needs it)"
    exit 0
  fi
  echo "autobahn: installing autobahntestsuite into .venv-ab2"
  "$py27" -m pip install -q 'virtualenv<20.22' >/dev/null 2>&1
  "$py27" -m virtualenv -q "$venv" >/dev/null
  "$venv/bin/pip" install -q autobahntestsuite >/dev/null 2>&1
fi

bin="${ROOMCAST_ECHO_BIN:-}"
if [ -z "$bin" ]; then
  swift build --product roomcast-echo >/dev/null
  bin="$(swift build --show-bin-path)/roomcast-echo"
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" --port "$port" >/tmp/roomcast-echo.$$.log 2>&1 &
echo_pid=$!
trap 'kill $echo_pid 2>/dev/null || true; wait $echo_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1',$port),0.2)" 2>/dev/null && break
  sleep 0.1
done

cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=('*')
work=$(mktemp -d)
python3 - "$work/fuzzingclient.json" "$port" "$root/reports/servers" "${AUTOBAHN_EXCLUDE:-}" "${cases[@]}" <<'PY'
import json, sys
path, port, outdir, exclude = sys.argv[1:5]
cases = sys.argv[5:]
json.dump({"outdir": outdir,
           "servers": [{"agent": "roomcast", "url": "ws://127.0.0.1:%s/" % port}],
           "cases": cases,
           "exclude-cases": exclude.split() if exclude else [],
           "exclude-agent-cases": {}}, open(path, "w"))
PY
rm -rf "$root/reports/servers"
start=$(date +%s)
(cd "$work" && "$venv/bin/wstest" -m fuzzingclient -s fuzzingclient.json >"$work/wstest.log" 2>&1) || {
  echo "autobahn: wstest failed to run"; tail -20 "$work/wstest.log"; exit 1; }
echo "autobahn: ran in $(( $(date +%s) - start )) s against $bin"

python3 - "$root/reports/servers/index.json" "${AUTOBAHN_STRICT:-0}" <<'PY'
import json, sys
from collections import Counter
index = json.load(open(sys.argv[1]))
strict = sys.argv[2] == "1"
results = index["roomcast"]
counts = Counter(r["behavior"] for r in results.values())
close_failed = [k for k, r in results.items() if r.get("behaviorClose") == "FAILED"]
failed = sorted([k for k, r in results.items() if r["behavior"] == "FAILED"] + close_failed,
                key=lambda c: [int(x) for x in c.split(".")])
nonstrict = sorted([k for k, r in results.items() if r["behavior"] == "NON-STRICT"],
                   key=lambda c: [int(x) for x in c.split(".")])
print("autobahn: %d cases: %s" % (len(results), " ".join("%s=%d" % kv for kv in sorted(counts.items()))))
if failed: print("autobahn: FAILED: " + " ".join(dict.fromkeys(failed)))
if nonstrict: print("autobahn: NON-STRICT: " + " ".join(nonstrict))
sys.exit(1 if failed or (strict and nonstrict) else 0)
PY
