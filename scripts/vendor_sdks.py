"""Contract check: drives a live roomcast with the vendors' real Python server SDKs from PyPI, the way an
app server switching its base URL would (SPEC §8).

Usage: python vendor_sdks.py --port PORT --key APP_KEY --secret APP_SECRET

  - VC-1 RongCloud v1 with `rc-server-sdk` (package `rongcloud`), `RongCloud(key, secret, host_url=...)`.
  - VC-3 Nexconn v4 with `ncsdk`, `Configuration(host=...)` + `set_nexconn_credentials(...)`.
  - VC-4 the two surfaces are one behaviour: what one SDK changes the other reads, and both refuse the
    same situation with the same code.
  - QS-1, QS-4, QS-6 (room QoS): RongCloud's low-priority types, message-type allowlist, chatroom user
    allowlist and stop/resume distribution; Nexconn's low-priority and priority type lists, priority
    senders and a send with `priority`. What a call changes is read back through the other SDK and
    through the native REST API (signed with the same RongCloud headers): the room's
    `distributionStopped` and the class each stored message travelled with.

Every step asserts something concrete and prints one line; the last line is `N passed, M failed`
(exit status 1 when anything failed). Nothing here changes what the SDKs put on the wire: the only
hook wraps `urllib.request.urlopen` to note the HTTP status, which rc-server-sdk hides (it returns the
parsed body on 2xx and the raw body bytes otherwise).

Notes on rc-server-sdk 3.2.0: it renders form bodies with Jinja2 and does NOT percent-encode them, so
values here avoid `&`, `=`, `+` and `%` (spaces and UTF-8 are fine). It reads no response keys and never
checks `code`. ncsdk 0.1.2 parses every answer into strict pydantic models (a type mismatch raises
`pydantic.ValidationError`) and turns non-2xx answers into typed exceptions carrying `error_code`.
"""
import argparse
import datetime
import hashlib
import json
import re
import sys
import time
import traceback
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import ncsdk
from ncsdk import exceptions as ncx
from rongcloud.module import Module
from rongcloud.rongcloud import RongCloud

DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")
# The gateway's own answer to a path it does not route at all (not a vendor shape).
UNROUTED = "unrouted"

passed = 0
failed = []


def step(name, fn):
    """Runs one step; an exception (assertion or SDK error) fails it and the run goes on."""
    global passed
    try:
        detail = fn()
    except Exception as e:  # noqa: BLE001 - every failure is reported, whatever raised it
        failed.append(name)
        if isinstance(e, AssertionError):
            lines = str(e).strip().splitlines() or ["assertion failed"]
        elif isinstance(e, ncx.ApiException):
            lines = [f"{type(e).__name__} HTTP {e.status} error_code={e.error_code} body {e.body}"]
        else:  # e.g. pydantic.ValidationError: an answer the SDK's strict model rejects
            lines = [f"{type(e).__name__}: {l}" if i == 0 else l for i, l in enumerate(str(e).strip().splitlines() or [""])]
            here = [f for f in traceback.extract_tb(e.__traceback__) if f.filename.endswith("vendor_sdks.py")]
            if here:
                lines.append(f"(at vendor_sdks.py line {here[-1].lineno})")
        print(f"FAIL {name}: {lines[0]}", flush=True)
        for line in lines[1:12]:
            print(f"       {line}", flush=True)
        return
    passed += 1
    print(f"ok   {name}" + (f": {detail}" if detail else ""), flush=True)


def expect(cond, message):
    if not cond:
        raise AssertionError(message)


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def expiry_near(text, minutes, what):
    """A `YYYY-MM-DD HH:MM:SS` expiry (UTC, as roomcast documents) about `minutes` from now."""
    expect(isinstance(text, str) and DATETIME.match(text), f"{what}: time {text!r} is not 'YYYY-MM-DD HH:MM:SS'")
    at = datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S")
    delta = (at - utc_now()).total_seconds()
    expect(abs(delta - minutes * 60) <= 90, f"{what}: expiry {text} is {delta:.0f}s from now, expected about {minutes * 60}s")


# ------------------------------------------------------------------------------------------------
# rc-server-sdk: note the HTTP status it hides.

last_http = {}
_urlopen = urllib.request.urlopen


def _recording_urlopen(req, *args, **kwargs):
    last_http.clear()
    last_http["url"] = getattr(req, "full_url", req)
    try:
        resp = _urlopen(req, *args, **kwargs)
    except urllib.error.HTTPError as e:
        last_http["status"] = e.code
        raise
    last_http["status"] = resp.status
    return resp


urllib.request.urlopen = _recording_urlopen  # rongcloud.module calls `request.urlopen` on this module


def rc_ok(answer, what):
    """A 2xx `{"code":200,...}` answer (the SDK gives a dict only on HTTP 2xx)."""
    expect(isinstance(answer, dict), f"{what}: HTTP {last_http.get('status')} with raw body {answer!r}")
    expect(last_http.get("status") == 200, f"{what}: HTTP {last_http.get('status')}")
    expect(answer.get("code") == 200, f"{what}: code {answer.get('code')!r} in {answer}")
    return answer


def rc_refused(answer, status, code, what):
    """A non-2xx answer: rc-server-sdk returns the raw body bytes; RongCloud's shape is
    `{"code":…, "errorMessage":…}`."""
    expect(isinstance(answer, (bytes, bytearray)), f"{what}: expected a refusal, SDK returned {answer!r}")
    body = json.loads(answer.decode("utf-8"))
    expect(last_http.get("status") == status, f"{what}: HTTP {last_http.get('status')}, expected {status} ({body})")
    expect(body.get("code") == code, f"{what}: code {body.get('code')!r}, expected {code} ({body})")
    expect(isinstance(body.get("errorMessage"), str) and body["errorMessage"], f"{what}: no errorMessage in {body}")
    return body


def native_get(base, key, secret, path):
    """A signed native GET (the RongCloud header scheme, which /v1 accepts too): the JSON answer."""
    nonce, ts = uuid.uuid4().hex, str(int(time.time()))
    sig = hashlib.sha1((secret + nonce + ts).encode()).hexdigest()
    req = urllib.request.Request(base + path, headers={"App-Key": key, "Nonce": nonce, "Timestamp": ts, "Signature": sig})
    with _urlopen(req, timeout=10) as resp:
        return json.loads(resp.read().decode("utf-8"))


def native_status(base, key, secret, method, path, body=None):
    """A signed native call: its HTTP status and JSON answer (refusals included)."""
    nonce, ts = uuid.uuid4().hex, str(int(time.time()))
    sig = hashlib.sha1((secret + nonce + ts).encode()).hexdigest()
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"App-Key": key, "Nonce": nonce, "Timestamp": ts, "Signature": sig, "Content-Type": "application/json"})
    try:
        with _urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read().decode("utf-8") or "{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode("utf-8") or "{}")


def native_call(base, key, secret, method, path, body=None):
    status, answer = native_status(base, key, secret, method, path, body)
    expect(200 <= status < 300, f"{method} {path}: HTTP {status} {answer}")
    return answer


def users_of(answer):
    return {u.get("userId"): u.get("time") for u in answer.get("users", [])}


# ------------------------------------------------------------------------------------------------
# ncsdk helpers.

def nc_refused(call, exc_type, status, code, what, field=None):
    try:
        r = call()
    except ncx.ApiException as e:
        expect(isinstance(e, exc_type), f"{what}: {type(e).__name__} (HTTP {e.status}), expected {exc_type.__name__}; body {e.body}")
        expect(e.status == status, f"{what}: HTTP {e.status}, expected {status}")
        expect(e.error_code == code, f"{what}: error_code {e.error_code}, expected {code}; body {e.body}")
        expect(e.error_message, f"{what}: no errorMessage in {e.body}")
        if field is not None:
            got = json.loads(e.body).get("field")
            expect(got == field, f"{what}: field {got!r}, expected the vendor's name {field!r}")
        return f"{exc_type.__name__} error_code={e.error_code}"
    raise AssertionError(f"{what}: expected {exc_type.__name__} {code}, SDK returned {r!r}")


def sdk_paths(files, pattern):
    """Every endpoint path an SDK can call, read from its installed source."""
    found = set()
    for f in files:
        found.update(re.findall(pattern, Path(f).read_text(encoding="utf-8")))
    return sorted(found)


def classify(status, body_bytes):
    """What a path answered, seen from the vendor SDK: a vendor-shaped answer, the vendor's
    'service not enabled' (HTTP 430, code 1009), or the gateway's generic 404 for an unknown path."""
    try:
        body = json.loads(body_bytes.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("code"), int):
        return UNROUTED, body
    if status == 430 and body.get("code") == 1009:
        return "unsupported", body
    if 200 <= status < 300 or isinstance(body.get("errorMessage"), str):
        return "vendor", body
    return UNROUTED, body


# ------------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--secret", required=True)
    args = ap.parse_args()
    base = f"http://127.0.0.1:{args.port}"
    run = str(int(time.time() * 1000))[-7:]  # ids unique per run, so a reused data dir cannot interfere

    # ============================== VC-1: RongCloud rc-server-sdk ==============================
    rc = RongCloud(args.key, args.secret, host_url=base)  # no trailing slash: the SDK concatenates
    room = rc.get_chatroom()
    user = room.get_user()
    r1, r2 = f"rc-lobby-{run}", f"rc-side-{run}"
    name1 = "Lobby 大厅 one"

    step("VC-1 rc chatroom.create two rooms (chatroom[id]=name, unencoded UTF-8 name)",
         lambda: rc_ok(room.create([(r1, name1), (r2, "Side")]), "create") and None)

    def rc_query():
        a = rc_ok(room.query([r1, r2]), "query")
        rooms = {c.get("chrmId"): c for c in a.get("chatRooms", [])}
        expect(set(rooms) == {r1, r2}, f"chatRooms ids {list(rooms)}, expected {[r1, r2]} (key chrmId)")
        expect(rooms[r1].get("name") == name1, f"name {rooms[r1].get('name')!r}, expected {name1!r}")
        expect(DATETIME.match(str(rooms[r1].get("time"))), f"time {rooms[r1].get('time')!r} is not 'YYYY-MM-DD HH:MM:SS'")
        return f"{len(rooms)} rooms, name round-trips"
    step("VC-1 rc chatroom.query returns both rooms with name and time", rc_query)

    def rc_empty_members():
        a = rc_ok(user.query(r1, 10, 1), "user.query")
        expect(a.get("total") == 0 and a.get("users") == [], f"expected total 0 and no users, got {a}")
        return "total 0"
    step("VC-1 rc chatroom user.query on an empty room", rc_empty_members)

    def rc_exist():
        one = rc_ok(user.isexist(r1, ["nobody"]), "user/exist")
        expect(one.get("isInChrm") in (False, 0), f"isInChrm {one.get('isInChrm')!r}, expected false/0")
        many = rc_ok(user.isexist(r1, ["nobody", "nobody2"]), "users/exist")
        items = {i.get("userId"): i.get("isInChrm") for i in many.get("result", [])}
        expect(items == {"nobody": 0, "nobody2": 0}, f"result {many.get('result')}, expected both isInChrm 0")
        return "1 and 2 ids"
    step("VC-1 rc chatroom user.isexist (one id, several ids)", rc_exist)

    gag = user.get_gag()
    step("VC-1 rc gag.add 2 users for 10 minutes", lambda: rc_ok(gag.add(["gag-a", "gag-b"], r1, 10), "gag.add") and None)

    def rc_gag_query():
        got = users_of(rc_ok(gag.query(r1), "gag.query"))
        expect(set(got) == {"gag-a", "gag-b"}, f"users {got}, expected gag-a and gag-b")
        for u, t in got.items():
            expiry_near(t, 10, f"gag {u}")
        return f"time {got['gag-a']}"
    step("VC-1 rc gag.query lists them with a 'YYYY-MM-DD HH:MM:SS' time", rc_gag_query)

    def rc_gag_remove():
        rc_ok(gag.remove(["gag-a", "gag-b"], r1), "gag.remove")
        got = users_of(rc_ok(gag.query(r1), "gag.query"))
        expect(not got, f"users still gagged: {got}")
    step("VC-1 rc gag.remove, then gag.query is empty", rc_gag_remove)

    ban = user.get_ban()

    def rc_ban():
        rc_ok(ban.add(["ban-a"], 5), "ban.add")
        got = users_of(rc_ok(ban.query(), "ban.query"))
        expect("ban-a" in got, f"ban-a not in global mutes {got}")
        expiry_near(got["ban-a"], 5, "ban ban-a")
        rc_ok(ban.remove(["ban-a"]), "ban.remove")
        got = users_of(rc_ok(ban.query(), "ban.query"))
        expect("ban-a" not in got, f"ban-a still globally muted: {got}")
    step("VC-1 rc ban (global mute) add/query/remove", rc_ban)

    block = user.get_block()

    def rc_block():
        rc_ok(block.add(["blk-a"], r1, 15), "block.add")
        got = users_of(rc_ok(block.query(r1), "block.query"))
        expect(set(got) == {"blk-a"}, f"blocks {got}, expected blk-a")
        expiry_near(got["blk-a"], 15, "block blk-a")
        rc_ok(block.remove(["blk-a"], r1), "block.remove")
        got = users_of(rc_ok(block.query(r1), "block.query"))
        expect(not got, f"still blocked: {got}")
    step("VC-1 rc block add/query/remove", rc_block)

    keep = room.get_keepalive()

    def rc_keepalive():
        rc_ok(keep.add(r1), "keepalive.add")
        ids = rc_ok(keep.query(), "keepalive.query").get("chatroomIds")
        expect(isinstance(ids, list) and r1 in ids, f"chatroomIds {ids!r} lacks {r1}")
        rc_ok(keep.remove(r1), "keepalive.remove")
        ids = rc_ok(keep.query(), "keepalive.query").get("chatroomIds")
        expect(isinstance(ids, list) and r1 not in ids, f"chatroomIds {ids!r} still has {r1}")
    step("VC-1 rc keepalive add/query/remove (empty-body POST for query)", rc_keepalive)

    note = rc.get_conversation().get_notification()
    conv_user, conv_group = f"conv-u-{run}", f"conv-g-{run}"

    def rc_notification():
        # isMuted on get.json is the unpushLevel (RongCloud's conversation notification docs): 5 "no notifications" after
        # isMuted=1, -1 "all messages" after isMuted=0.
        rc_ok(note.set(3, conv_user, conv_group, 1), "notification.set 1")
        muted = rc_ok(note.get(3, conv_user, conv_group), "notification.get").get("isMuted")
        expect(muted == 5, f"isMuted {muted!r} after set isMuted=1, expected 5")
        return "isMuted 5"
    step("VC-1 rc conversation notification set isMuted=1 / get", rc_notification)

    # ============================== VC-3: Nexconn ncsdk ==============================
    conf = ncsdk.Configuration(host=base)  # no trailing slash: the SDK concatenates
    conf.set_nexconn_credentials(app_key=args.key, app_secret=args.secret)
    client = ncsdk.ApiClient(conf)
    oc = ncsdk.OpenChannelManagementApi(client)
    mod = ncsdk.OpenChannelParticipantsModerationApi(client)
    meta = ncsdk.OpenChannelMetadataApi(client)
    comm = ncsdk.CommunityChannelManagementApi(client)
    chan = ncsdk.ChannelManagementApi(client)
    o1 = f"nc-open-{run}"
    c1, s1 = f"nc-comm-{run}", "stage"

    def nc_create():
        r = oc.create_open_channel(ncsdk.OpenChannelCreateRequest(channel_id=o1, destroy_type=0, ttl_minutes=60, should_freeze=True))
        expect(r.code == 0, f"code {r.code}")
    step("VC-3 nc create_open_channel (shouldFreeze true, ttl 60)", nc_create)

    def nc_get():
        r = oc.get_open_channel(ncsdk.OpenChannelGetRequest(channel_id=o1))  # strict model: parse = types right
        expect(r.code == 0 and r.result is not None, f"answer {r!r}")
        g = r.result
        expect(g.channel_id == o1, f"channelId {g.channel_id!r}")
        expect(g.is_frozen is True, f"isFrozen {g.is_frozen!r}, expected true")
        expect(isinstance(g.created_at, int) and abs(g.created_at - time.time() * 1000) < 120_000,
               f"createdAt {g.created_at!r} is not Unix milliseconds near now")
        expect(g.destroy_type == 0 and g.ttl_minutes == 60, f"destroyType {g.destroy_type} ttlMinutes {g.ttl_minutes}")
        expect(g.participant_count == 0, f"participantCount {g.participant_count}")
        return f"isFrozen True, createdAt {g.created_at}"
    step("VC-3 nc get_open_channel parses into OpenChannelGetResponse", nc_get)

    def nc_exist():
        r = mod.check_open_channel_participants_exist(ncsdk.OpenChannelParticipantExistRequest(channel_id=o1, participant_ids=["p-1"]))
        items = [(p.participant_id, p.is_in_open_channel) for p in (r.result.participants if r.result else None) or []]
        expect(r.code == 0 and items == [("p-1", 0)], f"participants {items}, expected [('p-1', 0)]")
        return "isInOpenChannel 0"
    step("VC-3 nc check_open_channel_participants_exist", nc_exist)

    def nc_participants():
        r = mod.list_open_channel_participants(ncsdk.OpenChannelParticipantListRequest(channel_id=o1, page_size=10, order=1))
        expect(r.code == 0 and r.result is not None and r.result.total == 0 and not r.result.participants, f"answer {r!r}")
    step("VC-3 nc list_open_channel_participants on an empty channel (total 0)", nc_participants)

    def nc_mute_list():
        r = mod.add_open_channel_participant_mute_list(ncsdk.OpenChannelParticipantMuteListAddRequest(
            channel_id=o1, participant_ids=["mute-a", "mute-b"], duration_minutes=20))
        expect(r.code == 0, f"add code {r.code}")
        r = mod.get_open_channel_participant_mute_list(ncsdk.OpenChannelParticipantListByChannelRequest(channel_id=o1))
        got = {m.participant_id: m.mute_expires_at for m in (r.result.muted_participants if r.result else None) or []}
        expect(set(got) == {"mute-a", "mute-b"}, f"mutedParticipants {got}")
        for u, t in got.items():
            expiry_near(t, 20, f"mute {u}")
        r = mod.remove_open_channel_participant_mute_list(ncsdk.OpenChannelParticipantMuteListRemoveRequest(
            channel_id=o1, participant_ids=["mute-b"]))
        expect(r.code == 0, f"remove code {r.code}")
        r = mod.get_open_channel_participant_mute_list(ncsdk.OpenChannelParticipantListByChannelRequest(channel_id=o1))
        got = [m.participant_id for m in (r.result.muted_participants if r.result else None) or []]
        expect(got == ["mute-a"], f"after remove mutedParticipants {got}, expected ['mute-a']")
        return f"muteExpiresAt {t}"
    step("VC-3 nc participant mute-list add/get/remove (durationMinutes)", nc_mute_list)

    def nc_global_mute():
        r = mod.add_open_channel_global_mute_list(ncsdk.OpenChannelGlobalMuteListAddRequest(participant_ids=["gmute-a"], duration_minutes=30))
        expect(r.code == 0, f"add code {r.code}")
        r = mod.get_open_channel_global_mute_list()  # the SDK posts `{}`
        got = {m.participant_id: m.mute_expires_at for m in (r.result.muted_participants if r.result else None) or []}
        expect("gmute-a" in got, f"gmute-a not in {got}")
        expiry_near(got["gmute-a"], 30, "global mute gmute-a")
        r = mod.remove_open_channel_global_mute_list(ncsdk.OpenChannelGlobalMuteListRemoveRequest(participant_ids=["gmute-a"]))
        expect(r.code == 0, f"remove code {r.code}")
        r = mod.get_open_channel_global_mute_list()
        got = [m.participant_id for m in (r.result.muted_participants if r.result else None) or []]
        expect("gmute-a" not in got, f"gmute-a still in {got}")
    step("VC-3 nc global-mute-list add/get/remove", nc_global_mute)

    def nc_freeze():
        r = mod.check_open_channel_freeze(ncsdk.OpenChannelFreezeCheckRequest(channel_id=o1))
        expect(r.code == 0 and r.result is not None and r.result.status == 1, f"answer {r!r}, expected status 1")
        r = mod.list_frozen_open_channels(ncsdk.OpenChannelFreezeListGetRequest(page=1, page_size=50))
        ids = (r.result.channel_ids if r.result else None) or []
        expect(o1 in ids, f"freeze-list/get channelIds {ids} lacks {o1}")
        return "status 1 (int)"
    step("VC-3 nc check_open_channel_freeze / freeze-list get", nc_freeze)

    def nc_metadata():
        r = meta.batch_set_open_channel_metadata(ncsdk.OpenChannelMetadataBatchSetRequest(
            channel_id=o1, metadata_owner_id="owner-1", metadata={"topic": "launch", "lang": "中文"}))
        expect(r.code == 0, f"set code {r.code}")
        r = meta.batch_get_open_channel_metadata(ncsdk.OpenChannelMetadataBatchGetRequest(channel_id=o1, metadata_keys=["topic", "lang"]))
        got = {m.key: (m.value, m.metadata_owner_id) for m in (r.result.metadata if r.result else None) or []}
        expect(got == {"topic": ("launch", "owner-1"), "lang": ("中文", "owner-1")}, f"metadata {got}")
        return "2 keys"
    step("VC-3 nc metadata batch set/get", nc_metadata)

    def nc_community():
        r = comm.create_community_channel(ncsdk.CommunityChannelCreateRequest(user_id="cc-owner", channel_id=c1, name="Community One"))
        expect(r.code == 0, f"create code {r.code}")
        r = comm.join_community_channel(ncsdk.CommunityChannelMemberRequest(user_id="cc-m1", channel_id=c1))
        expect(r.code == 0, f"join code {r.code}")
        r = comm.check_community_channel_member_exist(ncsdk.CommunityChannelMemberRequest(user_id="cc-m1", channel_id=c1))
        expect(r.result is not None and r.result.is_member is True, f"member/exist {r!r}")
        r = comm.check_community_channel_member_exist(ncsdk.CommunityChannelMemberRequest(user_id="stranger", channel_id=c1))
        expect(r.result is not None and r.result.is_member is False, f"member/exist stranger {r!r}")
    step("VC-3 nc community channel create / join / member exist", nc_community)

    def nc_subchannel():
        r = comm.create_community_subchannel(ncsdk.CommunitySubchannelCreateRequest(channel_id=c1, subchannel_id=s1, channel_visibility=0))
        expect(r.code == 0, f"subchannel/create code {r.code}")
        r = comm.update_community_subchannel_type(ncsdk.CommunitySubchannelTypeUpdateRequest(channel_id=c1, subchannel_id=s1, channel_visibility=1))
        expect(r.code == 0, f"subchannel-type/update code {r.code}")
        r = comm.list_community_subchannels(ncsdk.CommunitySubchannelListRequest(channel_id=c1))
        subs = {s.subchannel_id: s for s in (r.result.subchannels if r.result else None) or []}
        expect(s1 in subs and subs[s1].channel_visibility == 1, f"subchannels {subs}")
        expect(DATETIME.match(str(subs[s1].created_at)), f"createdAt {subs[s1].created_at!r}")
    step("VC-3 nc subchannel create, type update to private, list", nc_subchannel)

    def nc_private_members():
        r = comm.add_private_subchannel_members(ncsdk.CommunityPrivateSubchannelMembersRequest(channel_id=c1, subchannel_id=s1, user_ids=["cc-m1"]))
        expect(r.code == 0, f"member/add code {r.code}")
        r = comm.list_private_subchannel_members(ncsdk.CommunityPrivateSubchannelMemberListRequest(channel_id=c1, subchannel_id=s1))
        members = (r.result.members if r.result else None) or []
        expect(members == ["cc-m1"], f"members {members}")
        r = comm.list_community_user_subchannels(ncsdk.CommunityUserSubchannelListRequest(channel_id=c1, user_id="cc-m1"))
        mine = (r.result.sub_channels if r.result else None) or []
        expect(s1 in mine, f"cc-m1 subChannels {mine} lacks the private {s1}")
        r = comm.list_community_user_subchannels(ncsdk.CommunityUserSubchannelListRequest(channel_id=c1, user_id="cc-owner"))
        theirs = (r.result.sub_channels if r.result else None) or []
        expect(s1 not in theirs, f"cc-owner (not on the private list) sees {s1}: {theirs}")
        return f"cc-m1 sees {mine}"
    step("VC-3 nc private subchannel member add/list, user subchannel list", nc_private_members)

    # MO-4: user groups bound to the private subchannel (ncsdk's ten user-group calls).
    def mo_nc_user_groups():
        g1, g2 = f"nc-ug1-{run}", f"nc-ug2-{run}"
        r = comm.add_community_channel_user_groups(ncsdk.CommunityChannelUserGroupAddRequest(
            channel_id=c1, user_groups=[ncsdk.CommunityChannelUserGroupItem(user_group_id=g1), ncsdk.CommunityChannelUserGroupItem(user_group_id=g2)]))
        expect(r.code == 0, f"user-group/add code {r.code}")
        r = comm.list_community_channel_user_groups(ncsdk.CommunityChannelUserGroupListRequest(channel_id=c1, page=1, page_size=10))
        listed = [g.user_group_id for g in (r.result.user_groups if r.result else None) or []]
        expect(listed == [g1, g2], f"user-group/list {listed}")
        r = comm.add_community_channel_user_group_users(ncsdk.CommunityChannelUserGroupUsersRequest(channel_id=c1, user_group_id=g1, user_ids=["cc-owner"]))
        expect(r.code == 0, f"user-group/user/add code {r.code}")
        r = comm.bind_community_channel_user_group(ncsdk.CommunityChannelUserGroupBindingRequest(channel_id=c1, subchannel_id=s1, user_group_ids=[g1, g2]))
        expect(r.code == 0, f"channel/user-group/bind code {r.code}")
        r = comm.list_community_channel_subchannel_user_groups(ncsdk.CommunityChannelSubchannelUserGroupListRequest(channel_id=c1, subchannel_id=s1))
        bound = (r.result.user_group_ids if r.result else None) or []
        expect(bound == [g1, g2], f"channel/user-group/list {bound}")
        r = comm.list_community_channel_user_group_subchannels(ncsdk.CommunityChannelUserGroupSubchannelListRequest(channel_id=c1, user_group_id=g1))
        subs = (r.result.subchannel_ids if r.result else None) or []
        expect(subs == [s1], f"user-group/subchannel/list {subs}")
        r = comm.list_community_channel_user_user_groups(ncsdk.CommunityChannelUserUserGroupListRequest(channel_id=c1, user_id="cc-owner"))
        mine = (r.result.user_group_ids if r.result else None) or []
        expect(mine == [g1], f"user/user-group/list {mine}")
        # cc-owner is not on the private list: it sees the private subchannel through g1.
        r = comm.list_community_user_subchannels(ncsdk.CommunityUserSubchannelListRequest(channel_id=c1, user_id="cc-owner"))
        sees = (r.result.sub_channels if r.result else None) or []
        expect(s1 in sees, f"cc-owner through {g1} sees {sees}")
        r = comm.unbind_community_channel_user_group(ncsdk.CommunityChannelUserGroupBindingRequest(channel_id=c1, subchannel_id=s1, user_group_ids=[g1]))
        expect(r.code == 0, f"channel/user-group/unbind code {r.code}")
        r = comm.list_community_user_subchannels(ncsdk.CommunityUserSubchannelListRequest(channel_id=c1, user_id="cc-owner"))
        sees = (r.result.sub_channels if r.result else None) or []
        expect(s1 not in sees, f"cc-owner after the unbind sees {sees}")
        r = comm.remove_community_channel_user_group_users(ncsdk.CommunityChannelUserGroupUsersRequest(channel_id=c1, user_group_id=g1, user_ids=["cc-owner"]))
        expect(r.code == 0, f"user-group/user/remove code {r.code}")
        r = comm.remove_community_channel_user_groups(ncsdk.CommunityChannelUserGroupDeleteRequest(channel_id=c1, user_group_ids=[g1, g2]))
        expect(r.code == 0, f"user-group/remove code {r.code}")
        r = comm.list_community_channel_user_groups(ncsdk.CommunityChannelUserGroupListRequest(channel_id=c1))
        left = [g.user_group_id for g in (r.result.user_groups if r.result else None) or []]
        expect(left == [], f"user groups after remove {left}")
        return f"bound {bound}, then none"
    step("MO-4 nc user groups add/list, user add/remove, bind/unbind/list, subchannel and user lists, remove", mo_nc_user_groups)

    def mo_nc_user_group_refusals():
        g = f"nc-ugx-{run}"
        comm.add_community_channel_user_groups(ncsdk.CommunityChannelUserGroupAddRequest(
            channel_id=c1, user_groups=[ncsdk.CommunityChannelUserGroupItem(user_group_id=g)]))
        a = nc_refused(lambda: comm.add_community_channel_user_group_users(ncsdk.CommunityChannelUserGroupUsersRequest(
            channel_id=c1, user_group_id=g, user_ids=["stranger"])), ncx.ForbiddenException, 403, 24406, "user-group/user/add stranger", field="userIds")
        b = nc_refused(lambda: comm.bind_community_channel_user_group(ncsdk.CommunityChannelUserGroupBindingRequest(
            channel_id=c1, subchannel_id=s1, user_group_ids=[g, "missing"])), ncx.NotFoundException, 404, 40401, "bind unknown", field="userGroupIds")
        r = comm.list_community_channel_subchannel_user_groups(ncsdk.CommunityChannelSubchannelUserGroupListRequest(channel_id=c1, subchannel_id=s1))
        expect(((r.result.user_group_ids if r.result else None) or []) == [], "a refused bind bound something")
        comm.remove_community_channel_user_groups(ncsdk.CommunityChannelUserGroupDeleteRequest(channel_id=c1, user_group_ids=[g]))
        return f"{a}; {b}"
    step("MO-4 nc user-group refusals: a stranger -> 24406 (userIds), an unknown user group -> 40401 (userGroupIds), nothing bound",
         mo_nc_user_group_refusals)

    def nc_pin_push():
        r = chan.set_channel_pin(ncsdk.ChannelPinSetRequest(user_id="cc-m1", channel_type=10, channel_id=c1, is_pin=True))
        expect(r.code == 0, f"pin/set code {r.code}")
        r = chan.set_channel_push_notification(ncsdk.ChannelPushSetRequest(
            channel_type="10", request_id="cc-m1", channel_id=c1, subchannel_id=s1, no_disturb_level=1))
        expect(r.code == 0, f"push/set code {r.code}")
        r = chan.get_channel_push_notification(ncsdk.ChannelPushGetRequest(channel_type="10", request_id="cc-m1", channel_id=c1, subchannel_id=s1))
        expect(r.result is not None and r.result.no_disturb_level == 1, f"push/get {r!r}, expected noDisturbLevel 1")
        return "noDisturbLevel 1"
    step("VC-3 nc channel pin set, push set/get", nc_pin_push)

    def nc_type_push():
        r = chan.set_channel_type_notification(ncsdk.ChannelTypeNotificationSetRequest(channel_type="1", request_id="cc-m1", no_disturb_level=2))
        expect(r.code == 0, f"channel-type/push/set code {r.code}")
        r = chan.get_channel_type_notification(ncsdk.ChannelTypeNotificationGetRequest(channel_type="1", request_id="cc-m1"))
        expect(r.result is not None and r.result.no_disturb_level == 2, f"channel-type/push/get {r!r}, expected 2")
    step("VC-3 nc channel-type push set/get", nc_type_push)

    step("VC-3 nc refused input: mute durationMinutes 43201 -> BadRequestException 1002",
         lambda: nc_refused(lambda: mod.add_open_channel_participant_mute_list(ncsdk.OpenChannelParticipantMuteListAddRequest(
             channel_id=o1, participant_ids=["mute-c"], duration_minutes=43201)),
             ncx.BadRequestException, 400, 1002, "mute 43201", field="durationMinutes"))

    def nc_unchanged():
        r = mod.get_open_channel_participant_mute_list(ncsdk.OpenChannelParticipantListByChannelRequest(channel_id=o1))
        got = [m.participant_id for m in (r.result.muted_participants if r.result else None) or []]
        expect("mute-c" not in got, f"a refused mute changed state: {got}")
    step("VC-3 nc the refused call changed nothing (RC-8)", nc_unchanged)

    step("VC-3 nc unsupported endpoint (conversation tags) -> ApiException HTTP 430 error_code 1009",
         lambda: nc_refused(lambda: chan.add_tag_to_channels(ncsdk.ChannelTagAddRequest(
             user_id="cc-m1", tag_id="t1", channels=[ncsdk.ChannelTagTargetItem(channel_id=c1, channel_type=10)])),
             ncx.ApiException, 430, 1009, "channel/tag/add"))


    # ============================== QS: room QoS through both SDKs ==============================
    mprio = room.get_message().get_priority()
    mwhite = room.get_whitelist()
    uwhite = user.get_whitelist()
    low_type, gift_type = f"App:Like{run}", f"App:Gift{run}"
    low_api = ncsdk.OpenChannelMessagePriorityApi(client)
    prio_api = ncsdk.OpenChannelPriorityControlsApi(client)

    def qs_low_types():
        rc_ok(mprio.add([low_type, "App:Cheer"]), "priority.add")
        names = rc_ok(mprio.query(), "priority.query").get("objectNames")
        expect(isinstance(names, list) and low_type in names and "App:Cheer" in names, f"objectNames {names!r}")
        r = low_api.get_open_channel_low_priority_message_type_list()
        types = (r.result.message_types if r.result else None) or []
        expect(low_type in types and "App:Cheer" in types, f"Nexconn low-priority messageTypes {types} lack the RongCloud ones")
        rc_ok(mprio.remove(["App:Cheer"]), "priority.remove")
        r = low_api.remove_open_channel_low_priority_message_type_list(ncsdk.OpenChannelLowPriorityMessageTypeListRequest(message_types=[low_type]))
        expect(r.code == 0, f"low-priority remove code {r.code}")
        names = rc_ok(mprio.query(), "priority.query").get("objectNames")
        expect(low_type not in names and "App:Cheer" not in names, f"objectNames {names!r} after both removes")
        r = low_api.add_open_channel_low_priority_message_type_list(ncsdk.OpenChannelLowPriorityMessageTypeListRequest(message_types=[low_type]))
        expect(r.code == 0, f"low-priority add code {r.code}")
        return f"objectNames {rc_ok(mprio.query(), 'priority.query').get('objectNames')}"
    step("QS-1 rc message priority add/query/remove (objectName) is Nexconn's low-priority-message-type-list", qs_low_types)

    def qs_protected_types():
        rc_ok(mwhite.add([gift_type]), "whitelist.add")
        names = rc_ok(mwhite.query(), "whitelist.query").get("whitlistMsgType")
        expect(isinstance(names, list) and gift_type in names, f"whitlistMsgType {names!r} (the vendor's spelling)")
        r = prio_api.add_open_channel_priority_message_type_list(ncsdk.OpenChannelPriorityMessageTypeListRequest(message_types=["App:Crown"]))
        expect(r.code == 0, f"priority-message-type-list add code {r.code}")
        r = prio_api.get_open_channel_priority_message_type_list()
        types = (r.result.message_types if r.result else None) or []
        expect(gift_type in types and "App:Crown" in types, f"Nexconn priority messageTypes {types}")
        rc_ok(mwhite.remove(["App:Crown"]), "whitelist.remove")
        names = rc_ok(mwhite.query(), "whitelist.query").get("whitlistMsgType")
        expect("App:Crown" not in names and gift_type in names, f"whitlistMsgType {names!r} after remove")
        return f"whitlistMsgType {names}"
    step("QS-4 rc message-type whitelist add/query/delete (objectnames, whitlistMsgType) is Nexconn's priority-message-type-list", qs_protected_types)

    qs_room = f"qs-room-{run}"
    five = ["host", "cohost", "mod", "guest", "vip"]

    def qs_protected_users():
        rc_ok(room.create([(qs_room, "QoS")]), "create")
        rc_ok(uwhite.add(qs_room, five[:3]), "user whitelist add")
        r = prio_api.add_open_channel_priority_sender_list(ncsdk.OpenChannelParticipantIdsRequest(channel_id=qs_room, participant_ids=five[3:]))
        expect(r.code == 0, f"priority-sender-list add code {r.code}")
        users = rc_ok(uwhite.query(qs_room), "user whitelist query").get("users")
        expect(users == five, f"users {users!r}, expected {five}")
        r = prio_api.get_open_channel_priority_sender_list(ncsdk.OpenChannelParticipantListByChannelRequest(channel_id=qs_room))
        got = (r.result.participant_ids if r.result else None) or []
        expect(got == five, f"Nexconn participantIds {got}")
        return f"users {users}"
    step("QS-4 rc user whitelist add/query and nc priority-sender-list add/get are one list of a room", qs_protected_users)

    step("QS-4 rc a sixth protected user -> HTTP 400 code 1002",
         lambda: rc_refused(uwhite.add(qs_room, ["sixth"]), 400, 1002, "user whitelist 6th") and None)
    step("QS-4 nc a sixth priority sender -> BadRequestException 1002 naming participantIds",
         lambda: nc_refused(lambda: prio_api.add_open_channel_priority_sender_list(ncsdk.OpenChannelParticipantIdsRequest(
             channel_id=qs_room, participant_ids=["sixth"])), ncx.BadRequestException, 400, 1002, "priority sender 6th", field="participantIds"))

    def qs_unchanged():
        users = rc_ok(uwhite.query(qs_room), "user whitelist query").get("users")
        expect(users == five, f"a refused call changed the list: {users!r}")
        rc_ok(uwhite.remove(qs_room, ["vip"]), "user whitelist remove")
        r = prio_api.remove_open_channel_priority_sender_list(ncsdk.OpenChannelParticipantIdsRequest(channel_id=qs_room, participant_ids=["guest"]))
        expect(r.code == 0, f"priority-sender-list remove code {r.code}")
        users = rc_ok(uwhite.query(qs_room), "user whitelist query").get("users")
        expect(users == five[:3], f"users after both removes {users!r}")
    step("QS-4 the refused calls changed nothing; remove through either SDK", qs_unchanged)

    step("QS-4 rc user whitelist on a missing room -> HTTP 404 code 23410",
         lambda: rc_refused(uwhite.add(f"missing-{run}", ["a"]), 404, 23410, "user whitelist missing room") and None)
    step("QS-1 nc an empty messageTypes -> BadRequestException 1002 naming messageTypes",
         lambda: nc_refused(lambda: low_api.add_open_channel_low_priority_message_type_list(
             ncsdk.OpenChannelLowPriorityMessageTypeListRequest(message_types=[])), ncx.BadRequestException, 400, 1002, "empty types",
             field="messageTypes"))

    def qs_distribution():
        msg = room.get_message()
        rc_ok(msg.stop_distribution(qs_room), "stopDistribution")
        got = native_get(base, args.key, args.secret, f"/v1/rooms/{qs_room}")["room"].get("distributionStopped")
        expect(got is True, f"distributionStopped {got!r} after stopDistribution")
        rc_ok(msg.resume_distribution(qs_room), "resumeDistribution")
        got = native_get(base, args.key, args.secret, f"/v1/rooms/{qs_room}")["room"].get("distributionStopped")
        expect(got is None, f"distributionStopped {got!r} after resumeDistribution")
        return "stopped, then running"
    step("QS-6 rc message stop_distribution / resume_distribution (read back through GET /v1/rooms)", qs_distribution)
    step("QS-6 rc stop_distribution on a missing room -> HTTP 404 code 23410",
         lambda: rc_refused(room.get_message().stop_distribution(f"missing-{run}"), 404, 23410, "stopDistribution missing") and None)

    def qs_send_classes():
        mm = ncsdk.MessageManagementApi(client)
        sends = [("by type", low_type, None), ("asked low", "RC:TxtMsg", 3), ("asked high", "RC:TxtMsg", 2), ("protected", gift_type, 3)]
        for content, mtype, priority in sends:
            r = mm.send_open_channel_message(ncsdk.OpenChannelMessageSendRequest(
                from_user_id="someone", to_channel_ids=[qs_room], message_type=mtype, content=json.dumps({"content": content}), priority=priority))
            expect(r.code == 0, f"send {content}: code {r.code}")
        stored = native_get(base, args.key, args.secret, f"/v1/rooms/{qs_room}/messages?limit=10&order=asc")["messages"]
        classes = [(json.loads(m["content"])["content"], m.get("priority", "normal")) for m in stored]
        expect(classes == [("by type", "low"), ("asked low", "low"), ("asked high", "high"), ("protected", "high")], f"classes {classes}")
        return ", ".join(f"{c}: {p}" for c, p in classes)
    step("QS-1 nc send_open_channel_message: the type lists and priority decide each message's class", qs_send_classes)

    # ============================== VC-4: one behaviour, two spellings ==============================

    def vc4_room_visible():
        r = oc.get_open_channel(ncsdk.OpenChannelGetRequest(channel_id=r1))
        expect(r.code == 0 and r.result is not None and r.result.channel_id == r1 and r.result.is_frozen is False, f"answer {r!r}")
    step("VC-4 a room the RongCloud SDK created is the Nexconn open channel", vc4_room_visible)

    def vc4_mute_visible():
        r = mod.add_open_channel_participant_mute_list(ncsdk.OpenChannelParticipantMuteListAddRequest(
            channel_id=r1, participant_ids=["x-mute"], duration_minutes=7))
        expect(r.code == 0, f"nc add code {r.code}")
        got = users_of(rc_ok(gag.query(r1), "gag.query"))
        expect("x-mute" in got, f"RongCloud gag list {got} lacks the Nexconn mute")
        expiry_near(got["x-mute"], 7, "x-mute via RongCloud")
        rc_ok(gag.remove(["x-mute"], r1), "gag.remove")
        r = mod.get_open_channel_participant_mute_list(ncsdk.OpenChannelParticipantListByChannelRequest(channel_id=r1))
        left = [m.participant_id for m in (r.result.muted_participants if r.result else None) or []]
        expect("x-mute" not in left, f"Nexconn still lists x-mute after the RongCloud rollback: {left}")
    step("VC-4 a Nexconn mute is a RongCloud gag (and its rollback)", vc4_mute_visible)

    def vc4_global_mute():
        rc_ok(ban.add(["x-ban"], 9), "ban.add")
        r = mod.get_open_channel_global_mute_list()
        got = {m.participant_id: m.mute_expires_at for m in (r.result.muted_participants if r.result else None) or []}
        expect("x-ban" in got, f"Nexconn global mute list {got} lacks the RongCloud ban")
        rc_ok(ban.remove(["x-ban"]), "ban.remove")
    step("VC-4 a RongCloud global ban is a Nexconn global mute", vc4_global_mute)

    def vc4_dnd():
        r = chan.get_channel_push_notification(ncsdk.ChannelPushGetRequest(channel_type="3", request_id=conv_user, channel_id=conv_group))
        expect(r.result is not None and r.result.no_disturb_level == 5, f"Nexconn push/get {r!r}, expected 5 (RongCloud isMuted=1)")
        r = chan.set_channel_push_notification(ncsdk.ChannelPushSetRequest(channel_type="3", request_id=conv_user, channel_id=conv_group, no_disturb_level=-1))
        expect(r.code == 0, f"push/set code {r.code}")
        muted = rc_ok(note.get(3, conv_user, conv_group), "notification.get").get("isMuted")
        expect(muted == -1, f"RongCloud isMuted {muted!r}, expected -1 after Nexconn noDisturbLevel -1")
        rc_ok(note.set(3, conv_user, conv_group, 0), "notification.set 0")
        muted = rc_ok(note.get(3, conv_user, conv_group), "notification.get").get("isMuted")
        expect(muted == -1, f"isMuted {muted!r} after set isMuted=0, expected -1 (all messages)")
    step("VC-4 conversation Do-Not-Disturb: one setting, read by both SDKs", vc4_dnd)

    def vc4_same_limit():
        a = block.add(["lim"], r1, 43201)  # the SDK refuses this itself, without sending
        expect(isinstance(a, dict) and a.get("code") == 1002, f"rc-server-sdk client check: {a!r}")
        return nc_refused(lambda: mod.add_open_channel_participant_ban_list(ncsdk.OpenChannelParticipantMuteListAddRequest(
            channel_id=r1, participant_ids=["lim"], duration_minutes=43201)), ncx.BadRequestException, 400, 1002, "ban 43201")
    step("VC-4 the 43200-minute limit is 1002 on both (SDK-side on RongCloud, server-side on Nexconn)", vc4_same_limit)

    # ============================== MO-1, MO-2, MO-4 (issue 29) ==============================
    msg_api = ncsdk.MessageManagementApi(client)

    def mo_nc_delete():
        m = native_call(base, args.key, args.secret, "POST", f"/v1/rooms/{o1}/messages", {"content": "nc regret", "fromUserId": "nc-sender"})["message"]
        r = msg_api.delete_message(ncsdk.MessageDeleteRequest(from_user_id="nc-sender", channel_type=4, channel_id=o1, message_id=m["messageId"],
                                                              sent_at=m["time"], is_admin=1))
        expect(r.code == 0, f"message/delete code {r.code}")
        return nc_refused(lambda: msg_api.delete_message(ncsdk.MessageDeleteRequest(from_user_id="someone-else", channel_type=4, channel_id=o1,
                                                                                   message_id=m["messageId"])),
                          ncx.NotFoundException, 404, 40401, "delete again", field="messageId")
    step("MO-1 nc delete_message (open channel), then again -> NotFoundException 40401", mo_nc_delete)

    def mo_nc_rename():
        r = comm.update_community_channel_info(ncsdk.CommunityChannelUpdateRequest(channel_id=c1, name="Community Renamed"))
        expect(r.code == 0, f"community-channel/update code {r.code}")
        got = native_get(base, args.key, args.secret, f"/v1/groups/{c1}").get("group", {}).get("name")
        expect(got == "Community Renamed", f"name after update {got!r}")
    step("MO-4 nc update_community_channel_info renames", mo_nc_rename)

    cmod = ncsdk.CommunityChannelModerationApi(client)
    mm3 = ncsdk.MessageManagementApi(client)

    def mo_nc_community_messages():
        r = mm3.send_community_channel_message(ncsdk.CommunityChannelMessageSendRequest(
            from_user_id="cc-owner", to_channel_ids=[c1], message_type="RC:TxtMsg", content='{"content":"hello"}',
            has_metadata=True, metadata={"likes": "0"}))
        expect(r.code == 0 and r.result and r.result.message_ids, f"message/send {r!r}")
        mid = r.result.message_ids[0].message_id
        expect(r.result.message_ids[0].channel_id == c1, f"messageIds {r.result.message_ids}")
        r = mm3.update_community_channel_message(ncsdk.CommunityChannelMessageUpdateRequest(
            channel_id=c1, from_user_id="cc-owner", message_id=mid, content='{"content":"edited"}'))
        expect(r.code == 0, f"message/update code {r.code}")
        r = mm3.set_community_channel_message_metadata(ncsdk.CommunityChannelMessageMetadataSetRequest(
            message_id=mid, user_id="cc-m1", channel_id=c1, metadata={"likes": "1", "pin": "yes"}))
        expect(r.code == 0, f"metadata/set code {r.code}")
        r = mm3.delete_community_channel_message_metadata(ncsdk.CommunityChannelMessageMetadataDeleteRequest(
            message_id=mid, user_id="cc-m1", channel_id=c1, keys=["pin"]))
        expect(r.code == 0, f"metadata/delete code {r.code}")
        r = mm3.list_community_channel_message_metadata(ncsdk.CommunityChannelMessageMetadataListRequest(message_id=mid, channel_id=c1))
        entries = {e.key: e for e in (r.result.metadata if r.result else None) or []}
        expect(set(entries) == {"likes"} and entries["likes"].value == "1" and entries["likes"].updated_at, f"metadata/list {entries}")
        now = int(time.time() * 1000) + 1000
        r = mm3.list_community_channel_history_messages(ncsdk.CommunityChannelHistoryMessageListRequest(
            channel_id=c1, user_id="cc-m1", start_at=now, end_at=now - 3_600_000, page_size=10, include_start=True))
        msgs = (r.result.messages if r.result else None) or []
        expect(len(msgs) == 1 and msgs[0].message_id == mid and msgs[0].content == '{"content":"edited"}' and msgs[0].has_metadata,
               f"history-message/list {msgs}")
        return f"message {mid}: edited, metadata {{likes: 1}}, history 1"
    step("MO-3, MO-6 nc community-channel message send / update / metadata set, delete, list / history list", mo_nc_community_messages)

    def mo_nc_community_controls():
        r = cmod.add_community_channel_muted_users(ncsdk.CommunityChannelMuteListAddRequest(channel_id=c1, user_ids=["cc-m1"]))
        expect(r.code == 0, f"mute-list/add code {r.code}")
        r = cmod.list_community_channel_muted_users(ncsdk.CommunityChannelMuteListGetRequest(channel_id=c1))
        muted = [m.user_id for m in (r.result.muted_members if r.result else None) or []]
        expect(muted == ["cc-m1"], f"mute-list/get {muted}")
        r = cmod.remove_community_channel_muted_users(ncsdk.CommunityChannelMuteListRemoveRequest(channel_id=c1, user_ids=["cc-m1"]))
        expect(r.code == 0, f"mute-list/remove code {r.code}")
        r = cmod.add_community_channel_allowed_sender_list(ncsdk.CommunityChannelAllowedSenderListUpdateRequest(channel_id=c1, user_ids=["cc-owner"]))
        expect(r.code == 0, f"allowed-sender-list/add code {r.code}")
        r = cmod.list_community_channel_allowed_sender_list(ncsdk.CommunityChannelAllowedSenderListGetRequest(channel_id=c1))
        allowed = [m.user_id for m in (r.result.members if r.result else None) or []]
        expect(allowed == ["cc-owner"], f"allowed-sender-list/get {allowed}")
        r = cmod.set_community_channel_freeze_list(ncsdk.CommunityChannelFreezeListSetRequest(channel_id=c1, status=True))
        expect(r.code == 0, f"freeze-list/set code {r.code}")
        r = cmod.get_community_channel_freeze_list(ncsdk.CommunityChannelFreezeListGetRequest(channel_id=c1))
        expect(r.result is not None and r.result.status is True, f"freeze-list/get {r!r}")
        return nc_refused(lambda: cmod.add_community_channel_muted_users(ncsdk.CommunityChannelMuteListAddRequest(
            channel_id=c1, subchannel_id="no-such-subchannel", user_ids=["cc-m1"])), ncx.NotFoundException, 404, 40401, "mute unknown subchannel",
            field="subchannelId")
    step("MO-5 nc community-channel mute list, allowed senders, freeze; an unknown subchannel -> 404 naming subchannelId", mo_nc_community_controls)

    sens = rc.get_sensitive()
    w_rep, w_block = f"spam{run}", f"bad{run}"

    def mo_sensitive():
        rc_ok(sens.add(w_rep, "***"), "sensitiveword/add replace")
        rc_ok(sens.add(w_block), "sensitiveword/add block")
        blocking = [w.get("word") for w in rc_ok(sens.query(), "list default").get("words", [])]
        replaced = {w.get("word"): (w.get("type"), w.get("replaceWord")) for w in rc_ok(sens.query(0), "list 0").get("words", [])}
        expect(w_block in blocking and w_rep not in blocking, f"type 1 (default) lists {blocking}")
        expect(replaced.get(w_rep) == ("0", "***"), f"type 0 lists {replaced}")
        expect(len(rc_ok(sens.query(2), "list 2").get("words", [])) >= 2, "type 2 lists both")
        return "add replace/block, list 0/1/2"
    step("MO-2 rc sensitive.add (replaceWord and blocking) and query(0, 1, 2)", mo_sensitive)

    def mo_sensitive_send():
        # A client cannot send here without a WebSocket; the app server's sends are screened once
        # the app asks (sensitiveWordsOnServerSends), through the native API's PATCH.
        native_call(base, args.key, args.secret, "PATCH", "/v1/settings", {"sensitiveWordsOnServerSends": True})
        sent = native_call(base, args.key, args.secret, "POST", f"/v1/rooms/{r1}/messages", {"content": f"no {w_rep} here"})
        expect(sent.get("message", {}).get("content") == "no *** here", f"replaced send {sent}")
        status, body = native_status(base, args.key, args.secret, "POST", f"/v1/rooms/{r1}/messages", {"content": f"so {w_block}"})
        expect(status == 403 and body.get("code") == 21501, f"blocked send HTTP {status} {body}")
        native_call(base, args.key, args.secret, "PATCH", "/v1/settings", {"sensitiveWordsOnServerSends": False})
        return "replaced, then 21501"
    step("MO-2 a screened send is replaced, a blocked one is 21501", mo_sensitive_send)

    # rc-server-sdk 3.2.0's one-word remove renders its list into the form (`word=['x']`), so a
    # single word goes through the SDK's poster and the batch through the SDK.
    step("MO-2 rc sensitiveword/delete.json (one word), then sensitive.remove (a batch)",
         lambda: (rc_ok(Module(rc)._http_post("/sensitiveword/delete.json", f"word={w_rep}"), "delete"),
                  rc_ok(sens.remove([w_block, "never-added"]), "batch/delete"),
                  expect(rc_ok(sens.query(2), "list 2").get("words") == [], "list after removing")) and None)

    def mo_recall():
        m = native_call(base, args.key, args.secret, "POST", f"/v1/rooms/{r1}/messages", {"content": "regret", "fromUserId": "rc-sender"})["message"]
        form = f"fromUserId=rc-sender&conversationType=4&targetId={r1}&messageUID={m['messageId']}&sentTime={m['time']}&isAdmin=1"
        rc_ok(Module(rc)._http_post("/message/recall.json", form), "message/recall chatroom")
        history = native_get(base, args.key, args.secret, f"/v1/rooms/{r1}/messages?order=desc&limit=5").get("messages", [])
        kept = [h for h in history if h.get("messageId") == m["messageId"]]
        expect(kept and kept[0].get("recalled") is True and kept[0].get("content") == "", f"history after recall {kept}")
        again = rc_refused(Module(rc)._http_post("/message/recall.json", form), 404, 40401, "recall twice")
        return f"tombstone kept; again: {again.get('errorMessage')!r}"
    step("MO-1 rc /message/recall.json (chatroom) through the SDK's poster; history keeps the tombstone", mo_recall)
    step("MO-1 rc message.private.recall (conversationType 1) -> HTTP 430 code 1009 (no private conversations here)",
         lambda: rc_refused(rc.get_message().get_private().recall("a", "b", "uid", 1), 430, 1009, "private recall") and None)

    def mo_refresh():
        g = f"rc-ug-{run}"
        rc_ok(Module(rc)._http_post("/ultragroup/create.json", f"userId=ug-owner&groupId={g}&groupName=Old"), "ultragroup/create")
        rc_ok(Module(rc)._http_post("/ultragroup/refresh.json", f"groupId={g}&groupName=Renamed"), "ultragroup/refresh")
        got = native_get(base, args.key, args.secret, f"/v1/groups/{g}").get("group", {}).get("name")
        expect(got == "Renamed", f"name after refresh {got!r}")
        rc_ok(Module(rc)._http_post("/ultragroup/dis.json", f"groupId={g}"), "ultragroup/dis")
    step("MO-4 rc /ultragroup/refresh.json renames", mo_refresh)

    # MO-4: user groups (this SDK has no method for them: its module's poster, form bodies as the
    # RongCloud docs give them; userGroups as JSON text, ids comma-joined).
    def mo_rc_user_groups():
        g = f"rc-ugu-{run}"
        post = Module(rc)._http_post
        rc_ok(post("/ultragroup/create.json", f"userId=ug-owner&groupId={g}&groupName=G"), "ultragroup/create")
        rc_ok(post("/ultragroup/join.json", f"userId=ug-m1&groupId={g}"), "ultragroup/join")
        rc_ok(post("/ultragroup/channel/create.json", f"groupId={g}&busChannel=secret&type=1"), "channel/create private")
        rc_ok(post("/ultragroup/usergroup/add.json", f'groupId={g}&userGroups=[{{"userGroupId":"t1"}},{{"userGroupId":"t2"}}]'), "usergroup/add")
        listed = [u.get("userGroupId") for u in rc_ok(post("/ultragroup/usergroup/query.json", f"groupId={g}&page=1&pageSize=10"), "query")["userGroups"]]
        expect(listed == ["t1", "t2"], f"usergroup/query {listed}")
        rc_ok(post("/ultragroup/usergroup/user/add.json", f"groupId={g}&userGroupId=t1&userIds=ug-m1"), "usergroup/user/add")
        rc_refused(post("/ultragroup/usergroup/user/add.json", f"groupId={g}&userGroupId=t1&userIds=ug-m1,stranger"), 403, 24406, "stranger")
        rc_ok(post("/ultragroup/channel/usergroup/bind.json", f"groupId={g}&busChannel=secret&userGroupIds=t1,t2"), "bind")
        bound = rc_ok(post("/ultragroup/channel/usergroup/query.json", f"groupId={g}&busChannel=secret"), "channel/usergroup/query")["data"]
        expect(bound == ["t1", "t2"], f"bound {bound}")
        sees = rc_ok(post("/ultragroup/user/channel/query.json", f"groupId={g}&userId=ug-m1&page=1&pageSize=50"), "user/channel/query")["data"]
        expect("secret" in sees, f"ug-m1 through t1 sees {sees}")
        rc_ok(post("/ultragroup/usergroup/user/del.json", f"groupId={g}&userGroupId=t1&userIds=ug-m1"), "usergroup/user/del")
        rc_ok(post("/ultragroup/channel/usergroup/unbind.json", f"groupId={g}&busChannel=secret&userGroupIds=t2"), "unbind")
        rc_ok(post("/ultragroup/usergroup/del.json", f"groupId={g}&userGroupIds=t1,t2"), "usergroup/del")
        left = rc_ok(post("/ultragroup/channel/usergroup/query.json", f"groupId={g}&busChannel=secret"), "query after del")["data"]
        expect(left == [], f"bound after del {left}")
        rc_ok(post("/ultragroup/dis.json", f"groupId={g}"), "ultragroup/dis")
        return f"bound {bound}, then none"
    step("MO-4 rc /ultragroup/usergroup/* and /channel/usergroup/* through the SDK's poster", mo_rc_user_groups)

    # MO-3, MO-5, MO-6: ultra-group messages, expansion, bans and history (no SDK method either:
    # the poster, form bodies; the publish's toGroupIds comma-joined).
    def mo_rc_community():
        g = f"rc-ugm-{run}"
        post = Module(rc)._http_post
        rc_ok(post("/ultragroup/create.json", f"userId=ug-owner&groupId={g}&groupName=G"), "ultragroup/create")
        rc_ok(post("/ultragroup/join.json", f"userId=ug-m1&groupId={g}"), "ultragroup/join")
        sent = rc_ok(post("/message/ultragroup/publish.json", f'fromUserId=ug-owner&toGroupIds={g}&objectName=RC:TxtMsg&content={{"content":"hi"}}&expansion=true'),
                     "message/ultragroup/publish")
        uid = sent.get("messageUID")
        expect(uid, f"publish answered {sent}")
        rc_ok(post("/ultragroup/msg/modify.json", f'groupId={g}&fromUserId=ug-owner&msgUID={uid}&content={{"content":"edited"}}'), "msg/modify")
        rc_ok(post("/ultragroup/message/expansion/set.json", f'groupId={g}&msgUID={uid}&userId=ug-m1&extraKeyVal={{"likes":"1"}}'), "expansion/set")
        ext = rc_ok(post("/ultragroup/message/expansion/query.json", f"groupId={g}&msgUID={uid}"), "expansion/query").get("extraContent", {})
        expect(ext.get("likes", {}).get("v") == "1" and ext["likes"].get("ts"), f"extraContent {ext}")
        now = int(time.time() * 1000)
        data = rc_ok(post("/ultragroup/hismsg/query.json", f"groupId={g}&busChannel=RCDefault&startTime={now - 3_600_000}&endTime={now + 60_000}"),
                     "hismsg/query").get("data", [])
        expect([d.get("msgUID") for d in data] == [uid] and data[0].get("content") == '{"content":"edited"}', f"hismsg {data}")
        rc_ok(post("/ultragroup/userbanned/add.json", f"groupId={g}&userIds=ug-m1"), "userbanned/add")
        banned = [u.get("id") for u in rc_ok(post("/ultragroup/userbanned/get.json", f"groupId={g}"), "userbanned/get").get("users", [])]
        expect(banned == ["ug-m1"], f"userbanned {banned}")
        rc_ok(post("/ultragroup/globalbanned/set.json", f"groupId={g}&status=true"), "globalbanned/set")
        expect(rc_ok(post("/ultragroup/globalbanned/get.json", f"groupId={g}"), "globalbanned/get").get("status") is True, "globalbanned status")
        rc_ok(post("/ultragroup/banned/whitelist/add.json", f"groupId={g}&userIds=ug-owner"), "banned/whitelist/add")
        rc_refused(post("/ultragroup/userbanned/add.json", f"groupId={g}&busChannel=nope&userIds=ug-m1"), 404, 40401, "unknown busChannel")
        rc_ok(post("/ultragroup/dis.json", f"groupId={g}"), "ultragroup/dis")
        return f"message {uid}: modified, expansion likes=1, 1 in history; ug-m1 banned, group frozen"
    step("MO-3, MO-5, MO-6 rc ultra-group publish / msg/modify / expansion / hismsg / userbanned / globalbanned through the SDK's poster",
         mo_rc_community)

    # ============================== refusals, as each SDK surfaces them ==============================

    step("VC-1 rc user.query on a missing room -> raw bytes, HTTP 404 code 23410",
         lambda: f"errorMessage {rc_refused(user.query(f'missing-{run}', 10, 1), 404, 23410, 'user.query missing')['errorMessage']!r}")
    # Every /chatroom path rc-server-sdk 3.2.0 calls is served, and since MO-4 every RongCloud endpoint.
    step("VC-1 rc wrong app secret -> HTTP 401 code 1004",
         lambda: rc_refused(RongCloud(args.key, "not-the-secret", host_url=base).get_chatroom().query([r1]), 401, 1004, "bad signature") and None)

    def rc_destroy():
        rc_ok(room.destroy([r1, r2]), "destroy")
        a = rc_ok(room.query([r1, r2]), "query")
        expect(a.get("chatRooms") == [], f"chatRooms after destroy {a.get('chatRooms')}")
    step("VC-1 rc chatroom.destroy both, query is empty", rc_destroy)

    def nc_destroy():
        r = oc.destroy_open_channels(ncsdk.OpenChannelDestroyRequest(channel_ids=[o1]))
        expect(r.code == 0, f"destroy code {r.code}")
    step("VC-3 nc destroy_open_channels", nc_destroy)
    step("VC-3 nc get on the destroyed channel -> NotFoundException 23410",
         lambda: nc_refused(lambda: oc.get_open_channel(ncsdk.OpenChannelGetRequest(channel_id=o1)), ncx.NotFoundException, 404, 23410, "get destroyed"))
    step("VC-4 the same missing room is 23410 through the RongCloud SDK",
         lambda: rc_refused(user.query(o1, 10, 1), 404, 23410, "rc user.query on destroyed") and None)
    step("VC-3 nc wrong app secret -> UnauthorizedException 1004",
         lambda: nc_refused(lambda: ncsdk.OpenChannelManagementApi(ncsdk.ApiClient(_bad_conf(base, args.key))).get_open_channel(
             ncsdk.OpenChannelGetRequest(channel_id=o1)), ncx.UnauthorizedException, 401, 1004, "bad signature"))

    def nc_dismiss():
        r = comm.dismiss_community_channel(ncsdk.CommunityChannelDismissRequest(channel_id=c1))
        expect(r.code == 0, f"dismiss code {r.code}")
        return nc_refused(lambda: comm.check_community_channel_member_exist(ncsdk.CommunityChannelMemberRequest(user_id="cc-m1", channel_id=c1)),
                          ncx.NotFoundException, 404, 40401, "member/exist after dismiss")
    step("VC-3 nc dismiss_community_channel, then member/exist -> NotFoundException", nc_dismiss)

    # ============================== routing: every path each SDK can call ==============================
    # A path the SDK can call under the surface's prefixes must reach the surface: answered in the
    # vendor's shape (success, or a refusal with `errorMessage`), or with the vendor's "service not
    # enabled" (HTTP 430, 1009). The gateway's generic 404 is neither, and the SDKs cannot read it
    # (ncsdk: error_code 40400, error_message None). Each call posts an empty parameter set.
    import rongcloud  # noqa: E402 - only for its install location
    rc_files = sorted(Path(rongcloud.__file__).parent.glob("*.py"))
    rc_paths = sdk_paths(rc_files, r"url = '(/(?:chatroom|ultragroup|conversation|sensitiveword)/[^']+\.json)'")
    probe = Module(rc)

    def rc_routes():
        bad = []
        for path in rc_paths:
            a = probe._http_post(path, "")
            kind, body = classify(last_http.get("status", 0), a if isinstance(a, (bytes, bytearray)) else json.dumps(a).encode())
            if kind == UNROUTED:
                bad.append(f"{path} (HTTP {last_http.get('status')} {body})")
        expect(not bad, f"{len(bad)} of {len(rc_paths)} rc-server-sdk paths are not routed: " + "; ".join(bad))
        return f"{len(rc_paths)} paths"
    step("VC-1 every /chatroom, /ultragroup, /conversation, /sensitiveword path rc-server-sdk calls is routed", rc_routes)

    nc_files = sorted(Path(ncsdk.__file__).parent.joinpath("api").glob("*.py"))
    nc_paths = sdk_paths(nc_files, r"resource_path='(/v4/(?:open-channel|community-channel|channel|channel-type)/[^']+)'")

    def nc_post(path):
        params = client.param_serialize(method="POST", resource_path=path, body={},
                                        header_params={"Content-Type": "application/json", "Accept": "application/json"},
                                        auth_settings=["NexconnSignature"])
        resp = client.call_api(*params)
        resp.read()
        return resp.status, resp.data

    def nc_routes():
        bad = []
        for path in nc_paths:
            status, data = nc_post(path)
            kind, body = classify(status, data)
            if kind == UNROUTED:
                bad.append(path)
        expect(not bad, f"{len(bad)} of {len(nc_paths)} ncsdk paths answer the gateway's generic 404, not a Nexconn answer: " + ", ".join(bad))
        return f"{len(nc_paths)} paths"
    step("VC-3 every /v4/open-channel, community-channel, channel, channel-type path ncsdk calls is routed", nc_routes)

    total = passed + len(failed)
    if failed:
        print("failed steps:\n  - " + "\n  - ".join(failed))
    print(f"{passed} passed, {len(failed)} failed")
    return 1 if failed or total == 0 else 0


def _bad_conf(base, key):
    c = ncsdk.Configuration(host=base)
    c.set_nexconn_credentials(app_key=key, app_secret="not-the-secret")
    return c


if __name__ == "__main__":
    sys.exit(main())
