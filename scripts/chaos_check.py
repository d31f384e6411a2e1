"""The checker of scripts/chaos-cluster.sh (CL-8): reads one run's recorded history and says
whether the cluster kept its guarantees.

    python3 chaos_check.py HISTORY.jsonl      check a run; exit 1 on any violation
    python3 chaos_check.py --self-test        doctored histories, each of which must be caught

What it holds the history to (RELIABILITY.md, "Guarantees"):

 1. order      per room one total order: every client and every node's stream has the same event
               at the same (epoch, offset)
 2. lost       every acknowledged write (2xx, or 40903 "made, answer lost") is in every node's
               room stream once, with the message id its answer gave
 3. twice      no write is in a room stream twice (an Idempotency-Key retry made once), and
               nothing is there that no writer sent
 4. gaps       each client connection received its rooms' events with consecutive offsets, from
               its join on (a resuming join: from the offset it resumed after), except where it
               was told what it missed (room.gap, or room.resume with resumed false); and a
               client that stayed joined reached the room's last offset
 5. webhooks   every acknowledged write's message.sent webhook was answered 2xx at least once;
               one webhook id per message, and every delivery of an id carries the same body
 6. converge   after healing every node applied the log's head, and the nodes' digests are
               equal: each room's whole history and members (REST), and its event stream as a
               client resuming from offset 0 gets it, up to the offset every node reached (a node
               that refuses that resume, outOfWindow after a restart, is left out of the stream
               comparison and counted)
 7. retries    a write's retries after healing are answered (made, replayed, refused, or "try
               again" for a while), not "in progress" (409 40900) until the writer gives up
"""
import collections
import copy
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def check(records):
    """Returns (violations, summary)."""
    v = []
    run = next((r for r in records if r["k"] == "run"), {})
    seed = run.get("seed")
    if not any(r["k"] == "end" for r in records):
        v.append(("incomplete", "the run did not reach its end (no digest)"))

    acked = {}      # write id -> (room, messageId or None)
    for r in records:
        if r["k"] == "ack":
            acked[r["id"]] = (r["room"], r.get("messageId"))
        elif r["k"] == "made":
            acked.setdefault(r["id"], (r["room"], None))
    written = {r["id"]: r["room"] for r in records if r["k"] == "write"}

    # 1. One event per (room, epoch, offset), whoever saw it.
    seen = {}
    def saw(room, epoch, offset, ident, who):
        key = (room, epoch, offset)
        if key in seen and seen[key][0] != ident:
            v.append(("order", f"room {room} offset {offset}: {who} saw {ident}, {seen[key][1]} saw {seen[key][0]}"))
        seen.setdefault(key, (ident, who))

    def ident(ev, mid, digest):
        return f"{ev}:{mid}" if mid else f"{ev}:{digest}"

    # Events a connection is not sent: the room.memberChanged and the notifications about its own
    # user's joining or leaving go to the others only. Which user an event is about is read from
    # the nodes' streams.
    # and from what the other clients received (a node's stream holds only its resume window,
    # which starts empty after a restart: when every node restarted, the digests alone cannot
    # say what an early offset was).
    about = {}
    for r in records:
        if r["k"] == "digest" and isinstance(r.get("state"), dict):
            for room, s in r["state"].items():
                if isinstance(s, dict):
                    for e in s.get("events", []):
                        if len(e) > 5:
                            about[(room, e[0])] = (e[1], set(e[5]))
        elif r["k"] == "ev" and r.get("offset") is not None and r.get("room") is not None and "users" in r:
            about.setdefault((r["room"], r["offset"]), (r["ev"], set(r["users"])))

    def excused(user, room, first, last):
        for o in range(first, last + 1):
            ev, users = about.get((room, o), (None, set()))
            if ev is None or ev == "room.message" or user not in users:
                return False
        return True

    # A join's own two events (room.memberChanged and the notification, about the joiner and not
    # sent to it) come right after its answer's offset. When nobody else was there to receive
    # them and every node has restarted since (their streams start empty), nothing says what
    # they were: offsets no record describes, at most two, right after the connection's own
    # join answer, are taken as those, and only when every node started again after that join. (An acknowledged message is still checked by the nodes'
    # histories.)
    answered_at = {}   # (conn, room) -> (its join answer's offset, when)
    starts = collections.defaultdict(list)   # node -> times it started
    for r in records:
        if r["k"] == "node-start":
            starts[r["node"]].append(r["t"])

    def restarted_since(t):
        return bool(starts) and all(any(x > t for x in ts) for ts in starts.values())

    def own_join(conn, room, first, last):
        at = answered_at.get((conn, room))
        return (at is not None and first == at[0] + 1 and last - first < 2 and restarted_since(at[1])
                and all((room, o) not in about for o in range(first, last + 1)))

    # 4. Per connection and room: consecutive offsets unless told.
    state = {}   # (conn, room) -> expected next offset (None: set by the next event)
    last = {}    # (client, room) -> last offset the client saw
    joined_at = {}
    client_contents = collections.defaultdict(dict)   # room -> content -> offset
    for r in records:
        k = r["k"]
        if k == "join":
            pos = r.get("resume")
            state[(r["conn"], r["room"])] = pos[1] + 1 if pos else None
        elif k == "joined":
            key = (r["conn"], r["room"])
            if state.get(key) is None and not r.get("resume") and r.get("offset") is not None:
                state[key] = r["offset"] + 1
                answered_at[key] = (r["offset"], r["t"])
            joined_at[(r["c"], r["room"])] = r["t"]
            if r.get("offset") is not None:
                # after its join's answer a connection stands at the answer's offset (a resume's
                # replay came before it; a refused resume was told)
                last[(r["c"], r["room"])] = max(r["offset"], last.get((r["c"], r["room"]), -1))
        elif k == "left":
            state.pop((r["conn"], r["room"]), None)
            joined_at.pop((r["c"], r["room"]), None)
        elif k == "disconnect":
            for key in [x for x in state if x[0] == r["conn"]]:
                del state[key]
            for key in [x for x in joined_at if x[0] == r["c"]]:
                del joined_at[key]
        elif k == "ev":
            room, conn, offset = r.get("room"), r["conn"], r.get("offset")
            key = (conn, room)
            if r["ev"] == "room.gap":
                to = (r.get("gap") or {}).get("toOffset")
                if to is not None and key in state:
                    state[key] = max(state[key] or 0, to + 1)
                continue
            if r["ev"] == "room.resume":
                if not (r.get("resume") or {}).get("resumed", True) and key in state:
                    state[key] = None   # told: it could not resume; it starts again at its join
                continue
            if offset is None:
                continue
            saw(room, r.get("epoch"), offset, ident(r["ev"], r.get("mid"), r.get("digest")), f"client {r['c']}")
            if r.get("content") and r["ev"] == "room.message":
                prev = client_contents[room].get(r["content"])
                if prev is not None and prev != offset:
                    v.append(("twice", f"{r['content']} in room {room} at offsets {prev} and {offset} (seen by {r['c']})"))
                client_contents[room][r["content"]] = offset
            if key in state:
                want = state[key]
                if want is not None and offset < want:
                    v.append(("gaps", f"{conn} room {room}: offset {offset} after {want - 1} (repeated or out of order)"))
                elif want is not None and offset > want and not excused(r["c"], room, want, offset - 1) \
                        and not own_join(conn, room, want, offset - 1):
                    v.append(("gaps", f"{conn} room {room}: offsets {want}..{offset - 1} missed and not told"))
                state[key] = max(offset + 1, want or 0)
            last[(r["c"], room)] = max(offset, last.get((r["c"], room), -1))

    # 6 and 2, 3: the nodes' digests.
    digests = {r["node"]: r for r in records if r["k"] == "digest"}
    nodes = sorted(digests)
    rooms = sorted({room for d in digests.values() for room in (d.get("state") or {})})
    for n, d in digests.items():
        if "error" in d or "error" in (d.get("state") or {}):
            v.append(("converge", f"node {n}: no digest ({d.get('error') or d['state'].get('error')})"))
    good = [n for n in nodes if "error" not in digests[n] and "error" not in (digests[n].get("state") or {})]
    final_offset = {}
    refused_streams = 0
    for room in rooms:
        states = {n: digests[n]["state"][room] for n in good if room in digests[n]["state"]}
        # The stream as a resuming client gets it; a node that rebuilt its replica (a restart)
        # may no longer hold the whole run's resume window and says so (outOfWindow): that is a
        # refusal a client is told of, not a loss, so its stream is left out of the comparison.
        streams = {n: s for n, s in states.items() if (s.get("resume") or {}).get("resumed")}
        refused_streams += len(states) - len(streams)
        common = min((max((e[0] for e in s["events"]), default=0) for s in streams.values()), default=0)
        final_offset[room] = common
        ref = None
        for n, s in sorted(streams.items()):
            events = [tuple(e[:5]) for e in s["events"] if e[0] <= common]
            for e in events:
                saw(room, s.get("epoch"), e[0], ident(e[1], e[2], e[4]), f"node {n}")
            offsets = [e[0] for e in events]
            if offsets and offsets != list(range(offsets[0], offsets[0] + len(offsets))):
                v.append(("converge", f"node {n} room {room}: its stream has holes"))
            if ref is None:
                ref = (n, events)
            elif events != ref[1]:
                v.append(("converge", f"room {room}: node {n}'s stream differs from node {ref[0]}'s"))
        # Every node's whole history (REST): lost, twice, and the same everywhere.
        ref = None
        for n, s in sorted(states.items()):
            messages = [tuple(m) for m in s.get("messages", [])]
            contents = collections.Counter(c for _, c in messages if c)
            for c, count in contents.items():
                if count > 1:
                    v.append(("twice", f"node {n} room {room}: {c} applied {count} times"))
                if c not in written:
                    v.append(("twice", f"node {n} room {room}: {c} was never sent"))
                elif written[c] != room:
                    v.append(("order", f"node {n}: {c} in room {room}, sent to {written[c]}"))
            mids = {c: mid for mid, c in messages}
            for wid, (wroom, mid) in acked.items():
                if wroom != room:
                    continue
                if wid not in contents:
                    v.append(("lost", f"node {n} room {room}: acknowledged {wid} (message {mid}) is missing"))
                elif mid and mids.get(wid) != mid:
                    v.append(("lost", f"node {n} room {room}: {wid} answered as {mid}, stored as {mids.get(wid)}"))
            view = (messages, s.get("members"), s.get("epoch"))
            if ref is None:
                ref = (n, view)
            elif view != ref[1]:
                what = [name for name, a, b in zip(("history", "members", "epoch"), view, ref[1]) if a != b]
                v.append(("converge", f"room {room}: node {n} differs from node {ref[0]} in {', '.join(what)}"))
    settled = next((r for r in records if r["k"] == "settled"), None)
    if settled is None:
        v.append(("converge", "the run never settled"))
    else:
        behind = {n: a for n, a in settled["applied"].items() if a < settled["head"]}
        if behind or settled["head"] < 0:
            v.append(("converge", f"after healing, nodes behind the log's head {settled['head']}: {behind}"))

    # 4, end: a client that stayed joined reached its rooms' last message (writes stopped well
    # before the clients did; what follows the last message is the clients' own departures).
    last_message = {}
    for n in good:
        for room, s in digests[n]["state"].items():
            for e in s["events"]:
                if e[1] == "room.message":
                    last_message[room] = max(last_message.get(room, 0), e[0])
    end_t = {}
    for r in records:
        if r["k"] == "client-end":
            end_t.setdefault(r["c"], r["t"])
    for (c, room), t in joined_at.items():
        got = last.get((c, room), -1)
        if c in end_t and end_t[c] - t > 5 and room in last_message and got < last_message[room] \
                and not excused(c, room, got + 1, last_message[room]):
            v.append(("gaps", f"client {c} room {room}: joined since {t}s, ended at offset {got}; the last message is at {last_message[room]}"))

    # 5. Webhooks.
    bodies, ids_of = {}, collections.defaultdict(set)
    delivered = set()
    for r in records:
        if r["k"] != "hook":
            continue
        if r["id"] in bodies and bodies[r["id"]] != r["digest"]:
            v.append(("webhooks", f"webhook {r['id']} delivered with two different bodies"))
        bodies.setdefault(r["id"], r["digest"])
        if r.get("type") == "message.sent" and r.get("content"):
            ids_of[r["content"]].add(r["id"])
            if r.get("answered") == 204:
                delivered.add(r["content"])
    for wid in acked:
        if wid not in delivered:
            v.append(("webhooks", f"acknowledged {wid}: its message.sent webhook never delivered"))
    for c, ids in ids_of.items():
        if len(ids) > 1:
            v.append(("webhooks", f"{c}: message.sent under {len(ids)} webhook ids {sorted(ids)}"))

    # 7. Retries are answered. A write whose every retry after healing was answered 409 40900
    # ("the first call with this key is still being answered") until the writer gave up: its key
    # stayed in progress though no node run ended (CLUSTER.md allows that only for an answer
    # record lost with its node, or dropped past the owed bound).
    heal_t = next((r["t"] for r in records if r["k"] == "heal"), None)
    unknown = {r["id"] for r in records if r["k"] == "unknown"}
    if heal_t is not None:
        after = collections.defaultdict(list)
        for r in records:
            if r["k"] == "attempt" and r["id"] in unknown and r["t"] > heal_t:
                after[r["id"]].append(r)
        for wid, attempts in sorted(after.items()):
            if attempts and all(a["status"] == 409 and a.get("code") == 40900 for a in attempts):
                room = written.get(wid)
                present = sorted(n for n in good if any(c == wid for _, c in digests[n]["state"].get(room, {}).get("messages", [])))
                v.append(("retries", f"{wid}: {len(attempts)} retries over {max(a['t'] for a in attempts) - min(a['t'] for a in attempts):.0f} s after healing, "
                                     f"on {sorted({a['node'] for a in attempts})}, all answered 409 40900 (in progress); "
                                     f"the change is on nodes {present or 'none'}"))

    hooks = [r for r in records if r["k"] == "hook"]
    summary = {
        "seed": seed,
        "writes": len(written), "acknowledged": sum(1 for r in records if r["k"] == "ack"),
        "made (40903)": sum(1 for r in records if r["k"] == "made"),
        "unknown": sum(1 for r in records if r["k"] == "unknown"),
        "retried attempts": sum(1 for r in records if r["k"] == "attempt") - len(written),
        "replayed answers": sum(1 for r in records if r["k"] == "attempt" and r.get("replayed")),
        "client events": sum(1 for r in records if r["k"] == "ev"),
        "connections": sum(1 for r in records if r["k"] == "connect"),
        "resumes refused": sum(1 for r in records if r["k"] == "ev" and r["ev"] == "room.resume"
                               and not (r.get("resume") or {}).get("resumed", True)),
        "webhook deliveries": len(hooks), "webhook repeats": len(hooks) - len({h["id"] for h in hooks}),
        "webhooks again after a 2xx": sum(1 for i, h in enumerate(hooks) if any(
            o["id"] == h["id"] and o.get("answered") == 204 for o in hooks[:i])),
        "faults": [f"{r['kind']}:{r['target']}" for r in records if r["k"] == "fault"],
        "node exits": sum(1 for r in records if r["k"] == "node-exit"),
        "node starts by origin (CL-9)": " ".join(f"{k}:{n}" for k, n in sorted(collections.Counter(
            r.get("start") or "?" for r in records if r["k"] == "node-ready").items())) or "-",
        "final offsets": final_offset,
        "pending webhook deliveries at the end (node: owned/parked)": " ".join(
            f"{n}:{d.get('webhooks', {}).get('deliveries_owned', '?')}/{d.get('webhooks', {}).get('deliveries_parked', '?')}"
            for n, d in sorted(digests.items())),
        "streams not resumable on a node (outOfWindow after a restart)": refused_streams,
    }
    return v, summary


def report(violations, summary):
    s = dict(summary)
    faults = s.pop("faults")
    print("chaos-check: " + ", ".join(f"{k} {val}" for k, val in s.items() if k != "seed"))
    print(f"chaos-check: faults ({len(faults)}): {' '.join(faults)}")
    if not violations:
        print(f"chaos-check: seed {summary['seed']}: no violation")
        return 0
    by = collections.Counter(kind for kind, _ in violations)
    print(f"chaos-check: seed {summary['seed']}: {len(violations)} VIOLATIONS ({dict(by)}); first ones:")
    for kind, text in violations[:25]:
        print(f"  [{kind}] {text}")
    print(f"chaos-check: reproduce with: scripts/chaos-cluster.sh {summary['seed']}")
    return 1


# --- Self-test: the checker must catch each doctored history -------------------------------
def synthetic():
    """A small history that keeps every guarantee: one room, two clients (one moves node and
    resumes), three writes (one retried and replayed), their webhooks, three equal digests."""
    h = [{"k": "run", "seed": 0, "t": 0}]
    add = lambda k, **f: h.append(dict(f, k=k, t=len(h)))
    msgs = [(1, "w-n1-1", "m1"), (2, "w-n2-1", "m2"), (3, "w-n3-1", "m3")]
    for _, wid, _ in msgs:
        add("write", id=wid, room="r0")
    for c in ("u1", "u2"):
        add("connect", c=c, conn=f"{c}#1", node="n1")
        add("join", c=c, conn=f"{c}#1", room="r0", resume=None)
        add("joined", c=c, conn=f"{c}#1", room="r0", offset=0, epoch="e", resume=None)
    ev = lambda c, conn, off, wid, mid: add("ev", c=c, conn=conn, ev="room.message", room="r0", epoch="e", offset=off,
                                            mid=mid, content=wid, digest=f"d{off}")
    for off, wid, mid in msgs[:2]:
        add("attempt", id=wid, node="n1", status=200, code=None, replayed=False)
        add("ack", id=wid, room="r0", node="n1", messageId=mid)
        ev("u1", "u1#1", off, wid, mid)
        ev("u2", "u2#1", off, wid, mid)
    add("disconnect", c="u2", conn="u2#1", reason="move")
    add("connect", c="u2", conn="u2#2", node="n2")
    add("join", c="u2", conn="u2#2", room="r0", resume=["e", 2])
    off, wid, mid = msgs[2]
    add("attempt", id=wid, node="n3", status=0, code=None, replayed=False)
    add("attempt", id=wid, node="n3", status=200, code=None, replayed=True)
    add("ack", id=wid, room="r0", node="n3", messageId=mid)
    ev("u1", "u1#1", off, wid, mid)
    ev("u2", "u2#2", off, wid, mid)
    add("ev", c="u2", conn="u2#2", ev="room.resume", room="r0", epoch=None, offset=None, resume={"resumed": True, "replayed": 1}, digest="x")
    add("joined", c="u2", conn="u2#2", room="r0", offset=3, epoch="e", resume=["e", 2])
    for _, wid, mid in msgs:
        add("hook", id=f"msg_{mid}", type="message.sent", answered=204, digest=f"b{mid}", content=wid, mid=mid)
    add("hook", id="msg_m1", type="message.sent", answered=204, digest="bm1", content="w-n1-1", mid="m1")
    add("heal")
    add("settled", head=10, applied={"n1": 10, "n2": 10, "n3": 10})
    add("client-end", c="u1", rooms={"r0": ["e", 3]})
    add("client-end", c="u2", rooms={"r0": ["e", 3]})
    state = {"r0": {"epoch": "e", "resume": {"resumed": True}, "events": [[o, "room.message", m, w, f"d{o}"] for o, w, m in msgs],
                    "members": [], "messages": [[m, w] for _, w, m in msgs]}}
    for n in ("n1", "n2", "n3"):
        add("digest", node=n, state=copy.deepcopy(state))
    add("end")
    return h


def doctored():
    """(what, how): each breaks one guarantee the way a broken cluster would."""
    def find(h, **f):
        return next(i for i, r in enumerate(h) if all(r.get(k) == val for k, val in f.items()))

    def ack_before_commit(h):
        # a node that answers before its entry commits: the write is acknowledged, then lost with
        # PostgreSQL's crash; no node, client or receiver ever sees it
        h.insert(find(h, k="heal"), {"k": "write", "id": "w-n1-2", "room": "r0", "t": 0})
        h.insert(find(h, k="heal"), {"k": "ack", "id": "w-n1-2", "room": "r0", "node": "n1", "messageId": "m9", "t": 0})

    def applied_twice(h):
        # an idempotent retry applied again: the same write at a second offset everywhere
        for r in h:
            if r["k"] == "digest":
                r["state"]["r0"]["events"].append([4, "room.message", "m4", "w-n3-1", "d4"])
                r["state"]["r0"]["messages"].append(["m4", "w-n3-1"])
        h.insert(find(h, k="heal"), {"k": "ev", "c": "u1", "conn": "u1#1", "ev": "room.message", "room": "r0", "epoch": "e",
                                     "offset": 4, "mid": "m4", "content": "w-n3-1", "digest": "d4", "t": 0})

    def divergent_order(h):
        # a client that saw two events in another order than the others
        a, b = find(h, k="ev", c="u1", offset=1), find(h, k="ev", c="u1", offset=2)
        h[a]["offset"], h[b]["offset"] = 2, 1
        h[a], h[b] = h[b], h[a]

    def silent_gap(h):
        # a resume that skipped an event without saying so
        i = find(h, k="ev", c="u2", conn="u2#2", offset=3)
        h[find(h, k="join", conn="u2#2")]["resume"] = ["e", 1]

    def lost_on_one_node(h):
        # one node's replica lost an acknowledged message
        d = h[find(h, k="digest", node="n3")]
        d["state"]["r0"]["messages"] = d["state"]["r0"]["messages"][:2]

    def diverged_members(h):
        h[find(h, k="digest", node="n2")]["state"]["r0"]["members"] = ["u9"]

    def webhook_missing(h):
        i = find(h, k="hook", content="w-n2-1")
        del h[i]

    def webhook_new_id(h):
        h[[i for i, r in enumerate(h) if r["k"] == "hook"][-1]]["id"] = "msg_other"

    def webhook_other_body(h):
        h[[i for i, r in enumerate(h) if r["k"] == "hook"][-1]]["digest"] = "changed"

    def not_converged(h):
        h[find(h, k="settled")]["applied"]["n2"] = 7

    def lagging_client(h):
        # a client that stayed joined but stopped receiving before the room's last event
        del h[find(h, k="ev", c="u1", offset=3)]
        h[find(h, k="client-end", c="u1")]["t"] = 10_000

    def stuck_key(h):
        # a key left "in progress": every retry after healing answered 409 40900
        i = find(h, k="heal")
        healed = h[i]["t"]
        h.insert(i, {"k": "write", "id": "w-n2-2", "room": "r0", "t": 0})
        j = find(h, k="settled")
        for t in (1, 2, 3):
            h.insert(j, {"k": "attempt", "id": "w-n2-2", "node": "n2", "status": 409, "code": 40900, "replayed": False, "t": healed + t})
        h.insert(j, {"k": "unknown", "id": "w-n2-2", "room": "r0", "t": healed + 4})

    return [("key stuck in progress", stuck_key), ("acknowledged before commit", ack_before_commit), ("applied twice", applied_twice),
            ("order differs", divergent_order), ("gap not told", silent_gap), ("lost on one node", lost_on_one_node),
            ("members diverged", diverged_members), ("webhook missing", webhook_missing),
            ("webhook id changed", webhook_new_id), ("webhook body changed", webhook_other_body),
            ("node behind after healing", not_converged), ("client left behind", lagging_client)]


def self_test():
    base = synthetic()
    v, _ = check(base)
    failures = 0
    if v:
        print(f"chaos-check self-test: the intact history was refused: {v}")
        failures += 1
    for what, doctor in doctored():
        h = copy.deepcopy(base)
        doctor(h)
        v, _ = check(h)
        print(f"chaos-check self-test: {what}: {'caught: ' + v[0][0] + ': ' + v[0][1] if v else 'NOT CAUGHT'}")
        failures += 0 if v else 1
    print(f"chaos-check self-test: {'passed' if not failures else f'{failures} FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    violations, summary = check(load(sys.argv[1]))
    sys.exit(report(violations, summary))
