# Sourced by the scripts that drive a live roomcast:
#   start_roomcast BIN KEY:SECRET [more options]
# starts it on a free port with a fresh data directory, waits until it listens, and sets
# roomcast_pid and roomcast_port; on exit it is stopped and its data directory removed.
start_roomcast() {
  local bin=$1 app=$2
  shift 2
  roomcast_data=$(mktemp -d)
  roomcast_log=$(mktemp)
  "$bin" --port 0 --data-dir "$roomcast_data" --app "$app" --log-level warning "$@" >"$roomcast_log" 2>&1 &
  roomcast_pid=$!
  trap 'kill $roomcast_pid 2>/dev/null || true; wait $roomcast_pid 2>/dev/null || true; rm -rf "$roomcast_data" "$roomcast_log"' EXIT
  for _ in $(seq 1 200); do grep -q "listening on" "$roomcast_log" && break; sleep 0.05; done
  roomcast_port=$(sed -n 's/.*listening on http:\/\/[0-9.]*:\([0-9]*\).*/\1/p' "$roomcast_log" | head -1)
  [ -n "$roomcast_port" ] || { echo "roomcast did not start"; cat "$roomcast_log"; return 1; }
}
