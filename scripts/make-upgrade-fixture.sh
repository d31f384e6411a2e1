#!/usr/bin/env bash
# OP-3: makes an upgrade fixture from an earlier commit, with that commit's own build.
#
#   scripts/make-upgrade-fixture.sh COMMIT
#
# Builds COMMIT (git archive into the git-ignored .build-upgrade/COMMIT/src, debug build of the
# roomcast product; dependencies come from this checkout's .build/repositories cache when there is
# one), starts it on a fresh data directory, drives it through a short scenario over its REST API
# (an app, two rooms, a member with a role, messages, a permanent and a temporary mute, a global
# mute, a webhook endpoint), stops it with SIGTERM, and saves its database — checkpointed and
# vacuumed into one small file — with a manifest of what the scenario made as
# Tests/Fixtures/upgrade/COMMIT/{roomcast.sqlite,manifest.json}. Every call must be acknowledged
# (2xx) by the old build, or the script fails. The fixtures are committed; tests open them with the
# current build (Tests/StoreTests/UpgradeFixtureTests.swift, Tests/GatewayTests/OperationsEndToEndTests.swift),
# so CI never rebuilds old commits.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

commit=$(git rev-parse --short=10 "${1:?usage: scripts/make-upgrade-fixture.sh COMMIT}^{commit}")
scratch="$root/.build-upgrade/$commit"
src="$scratch/src"
bin="$src/.build/debug/roomcast"

if [ ! -x "$bin" ]; then
    echo "== building $commit in $src (a first build takes several minutes)"
    rm -rf "$src"
    mkdir -p "$src"
    git archive "$commit" | tar -x -C "$src"
    if [ -d .build/repositories ]; then
        mkdir -p "$src/.build"
        cp -a .build/repositories "$src/.build/"
    fi
    (cd "$src" && swift build --product roomcast 2>&1 | tail -3)
fi

data="$scratch/data"
rm -rf "$data"
mkdir -p "$data"
app=fixture
secret=fixture-secret-0123456789
log="$scratch/roomcast.log"
"$bin" --port 0 --data-dir "$data" --app "$app:$secret" --log-level warning >"$log" 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true' EXIT
port=""
for _ in $(seq 1 200); do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$log"; echo "roomcast $commit exited early" >&2; exit 1; }
    sleep 0.1
done
[ -n "$port" ] || { cat "$log"; echo "roomcast $commit did not listen" >&2; exit 1; }

# One signed call (RongCloud scheme); fails unless the answer is 2xx.
call() {
    local method=$1 path=$2 body=${3:-}
    local nonce ts sig status
    nonce=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
    ts=$(date +%s)
    sig=$(printf '%s' "$secret$nonce$ts" | sha1sum | cut -d' ' -f1)
    status=$(curl -s -o "$scratch/answer.json" -w '%{http_code}' -X "$method" "http://127.0.0.1:$port$path" \
        -H "App-Key: $app" -H "Nonce: $nonce" -H "Timestamp: $ts" -H "Signature: $sig" \
        ${body:+-H 'Content-Type: application/json' -d "$body"})
    case $status in
        2*) ;;
        *) echo "$method $path -> $status: $(cat "$scratch/answer.json")" >&2; exit 1 ;;
    esac
}

echo "== scenario against $commit on port $port"
call POST /v1/rooms '{"roomId":"lobby","name":"Lobby"}'
call POST /v1/rooms '{"roomId":"quiet","name":"Quiet room"}'
call PUT /v1/rooms/lobby/members/alice/role '{"role":"manager"}'
for n in 1 2 3; do
    call POST /v1/rooms/lobby/messages "{\"content\":\"hello $n\",\"fromUserId\":\"alice\"}"
done
call POST /v1/rooms/lobby/mutes '{"userIds":["bob"]}'
call POST /v1/rooms/lobby/mutes '{"userIds":["carol"],"minutes":43200}'
call POST /v1/global-mutes '{"userIds":["mallory"],"minutes":43200}'
call POST /v1/webhooks '{"url":"https://hooks.example.com/roomcast"}'

kill -TERM "$pid"
wait "$pid" || { cat "$log"; echo "roomcast $commit did not stop cleanly" >&2; exit 1; }
trap - EXIT

out="$root/Tests/Fixtures/upgrade/$commit"
rm -rf "$out"
mkdir -p "$out"
python3 - "$data/roomcast.sqlite" "$out" "$commit" "$(git log -1 --format=%cI "$commit")" <<'EOF'
import json, os, shutil, sqlite3, sys
db, out, commit, date = sys.argv[1:5]
c = sqlite3.connect(db)
c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
c.execute("PRAGMA journal_mode=DELETE")
c.execute("VACUUM")
migrations = [r[0] for r in c.execute("SELECT identifier FROM grdb_migrations")]
c.close()
shutil.copyfile(db, os.path.join(out, "roomcast.sqlite"))
manifest = {
    "commit": commit,
    "commitDate": date,
    "madeBy": "scripts/make-upgrade-fixture.sh",
    "migrations": migrations,
    "app": {"key": "fixture", "secret": "fixture-secret-0123456789"},
    "rooms": {"lobby": "Lobby", "quiet": "Quiet room"},
    "roles": [{"room": "lobby", "user": "alice", "role": "manager"}],
    "messages": [{"room": "lobby", "sender": "alice", "content": "hello %d" % n} for n in (1, 2, 3)],
    "permanentMutes": [{"room": "lobby", "user": "bob"}],
    "temporaryMutes": [{"room": "lobby", "user": "carol", "minutes": 43200}],
    "globalMutes": [{"user": "mallory", "minutes": 43200}],
    "webhookEndpoints": ["https://hooks.example.com/roomcast"],
}
with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=2, sort_keys=True)
    f.write("\n")
EOF
echo "== $out: $(du -h "$out/roomcast.sqlite" | cut -f1) ($(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["migrations"]))' "$out/manifest.json") migrations)"
