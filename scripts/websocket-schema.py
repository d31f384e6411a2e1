"""Checks recorded WebSocket frames against the published protocol schema.

Usage: python websocket-schema.py openapi/roomcast.websocket.json FRAME_LOG

Every frame the server sent must be a ServerMessage; every answer's `ok` must match the reply schema
of the op it answers; every command the server accepted must be a ClientMessage. Then it lists the
ops and events of the document that no test exchanged, and fails if there are any.
"""
import json
import sys

import jsonschema_rs

doc = json.load(open(sys.argv[1]))
defs = doc["$defs"]


def validator(ref):
    return jsonschema_rs.Draft202012Validator({"$ref": ref, "$defs": defs})


server = validator("#/$defs/ServerMessage")
compact = validator("#/$defs/CompactServerMessage")
client = validator("#/$defs/ClientMessage")
ops = {m["properties"]["op"]["const"]: m["x-reply"] for m in defs["ClientMessage"]["oneOf"]}
reply_validators = {op: validator(ref) for op, ref in ops.items()}
events = {defs[r["$ref"].split("/")[-1]]["properties"]["ev"]["const"] for r in defs["ServerMessage"]["oneOf"]
          if "ev" in defs[r["$ref"].split("/")[-1]]["properties"]}

pending = {}  # (conn, id) -> command
seen_ops, seen_events, failures, frames, seen_compact = set(), set(), [], 0, 0
for line in open(sys.argv[2]):
    rec = json.loads(line)
    frames += 1
    conn, frame = rec["conn"], rec["frame"]
    if rec["dir"] == "out":
        pending[(conn, frame.get("id"))] = frame
        continue
    is_compact = rec.get("encoding") == "compact"
    errors = [e.message for e in (compact if is_compact else server).iter_errors(frame)]
    if errors:
        failures.append(f"{'compact ' if is_compact else ''}server frame {json.dumps(frame)[:300]}: {errors[:2]}")
        continue
    if "ev" in frame:
        seen_events.add(frame["ev"])
        continue
    if is_compact and ("e" in frame or "m" in frame):
        seen_compact += 1
        continue
    command = pending.pop((conn, frame.get("id")), None)
    if command is None or "ok" not in frame:
        continue
    op = command.get("op")
    if op not in ops:
        failures.append(f"ok answer to an op the document does not list: {op}")
        continue
    seen_ops.add(op)
    for e in client.iter_errors(command):
        failures.append(f"accepted command {json.dumps(command)[:300]} is not a ClientMessage: {e.message}")
        break
    for e in reply_validators[op].iter_errors(frame["ok"]):
        failures.append(f"answer to {op} {json.dumps(frame['ok'])[:300]}: {e.message}")
        break

print(f"websocket-schema: {frames} frames checked; ops answered ok: {len(seen_ops)}/{len(ops)}; events seen: {len(seen_events)}/{len(events)}; compact events: {seen_compact}")
missing_ops, missing_events = sorted(set(ops) - seen_ops), sorted(events - seen_events)
if seen_compact == 0:
    failures.append("no test received a compact event (TR-5)")
if missing_ops:
    failures.append(f"ops no test completed: {missing_ops}")
if missing_events:
    failures.append(f"events no test received: {missing_events}")
for f in failures[:40]:
    print("  FAIL", f)
sys.exit(1 if failures else 0)
