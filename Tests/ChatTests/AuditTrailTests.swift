import Foundation
import Testing
@testable import Chat

/// MO-8 in the domain: every kind of moderation action records exactly one entry (who, through
/// which surface, what, on what, when), a refused one records nothing, the trail keeps the newest
/// `Limits.auditEntriesPerApp` entries, pages newest first, is per app, and is part of the
/// domain's image.
@Suite struct AuditTrailTests {
    /// Room r (created by host) with alice, bob and a manager (boss) present; the trail holds the
    /// role change that made boss a manager (entry 1).
    func room() -> (Harness, alice: SessionID, bob: SessionID, boss: SessionID) {
        let h = Harness()
        h.createRoom("r") { $0.creator = "host" }
        let alice = h.connect("alice"), bob = h.connect("bob"), boss = h.connect("boss")
        for s in [alice, bob, boss] { #expect(h.join(s, "r").succeeded) }
        #expect(h.run(.setRole(app: h.app, roomId: "r", target: "boss", .setManager(true), .server, notifyExt: "")).succeeded)
        h.clearInboxes()
        return (h, alice, bob, boss)
    }

    func all(_ h: Harness, app: String? = nil, roomId: String? = nil) -> [AuditEntry] {
        var out: [AuditEntry] = []
        var before: Int64?
        while true {
            guard case .audit(let page, let next)? = h.query(.audit(app: app ?? h.app, roomId: roomId, before: before, limit: Limits.maxAuditPage)) else {
                Issue.record("the audit query failed")
                return out
            }
            out += page
            guard let next else { return out }
            before = next
        }
    }

    func send(_ h: Harness, _ s: SessionID, _ text: String) -> ChatMessage? {
        if case .success(.message(let m)) = h.run(.sendMessage(app: h.app, roomId: "r", .session(s), .text, content: text)).reply { return m }
        return nil
    }

    @Test("MO-8: each kind of moderation action records exactly one entry: actor, surface, action, room, targets, duration and the command's time")
    func everyActionKindRecordsOneEntry() throws {
        let (h, alice, _, _) = room()
        let m = try #require(send(h, alice, "hello"))
        typealias Expected = (AuditAction, roomId: String, targets: [String], durationMs: Int64?, detail: String)
        let server: [(Command, Expected)] = [
            (.block(app: h.app, roomId: "r", ["bob"], minutes: 10, .server, rc: nil, nim: nil), (.block, "r", ["bob"], 600_000, "")),
            (.unblock(app: h.app, roomId: "r", ["bob"], .server, rc: nil, nim: nil), (.unblock, "r", ["bob"], nil, "")),
            (.mute(app: h.app, roomId: "r", ["alice"], .minutes(5), .server, rc: nil, nim: nil), (.mute, "r", ["alice"], 300_000, "temporary")),
            (.mute(app: h.app, roomId: "r", ["alice"], .permanent, .server, rc: nil, nim: nil), (.mute, "r", ["alice"], nil, "permanent")),
            (.unmute(app: h.app, roomId: "r", ["alice"], .all, .server, rc: nil, nim: nil), (.unmute, "r", ["alice"], nil, "all")),
            (.setRoomMuted(app: h.app, roomId: "r", true, .server, rc: nil, nim: nil), (.roomMute, "r", [], nil, "")),
            (.setRoomMuted(app: h.app, roomId: "r", false, .server, rc: nil, nim: nil), (.roomUnmute, "r", [], nil, "")),
            (.addToAllowlist(app: h.app, roomId: "r", ["alice"], rc: nil), (.allowlistAdd, "r", ["alice"], nil, "")),
            (.removeFromAllowlist(app: h.app, roomId: "r", ["alice"], rc: nil), (.allowlistRemove, "r", ["alice"], nil, "")),
            (.globalMute(app: h.app, ["carol"], minutes: 2, rc: nil), (.globalMute, "", ["carol"], 120_000, "")),
            (.globalUnmute(app: h.app, ["carol"], rc: nil), (.globalUnmute, "", ["carol"], nil, "")),
            (.tagMute(app: h.app, roomId: "r", tag: "vip", seconds: 30, notify: nil, notifyTargetTags: nil, .server), (.tagMute, "r", ["vip"], 30_000, "")),
            (.tagMute(app: h.app, roomId: "r", tag: "vip", seconds: 0, notify: nil, notifyTargetTags: nil, .server), (.tagUnmute, "r", ["vip"], nil, "")),
            (.setRole(app: h.app, roomId: "r", target: "bob", .assign(.common), .server, notifyExt: ""), (.role, "r", ["bob"], nil, "common")),
            (.editSensitiveWords(app: h.app, add: [SensitiveWord(word: "spam")], remove: []), (.sensitiveWordAdd, "", ["spam"], nil, "")),
            (.editSensitiveWords(app: h.app, add: [], remove: ["spam"]), (.sensitiveWordRemove, "", ["spam"], nil, "")),
            (.setDistribution(app: h.app, roomId: "r", stopped: true), (.distributionStop, "r", [], nil, "")),
            (.setDistribution(app: h.app, roomId: "r", stopped: false), (.distributionResume, "r", [], nil, "")),
            (.recallMessage(app: h.app, roomId: "r", messageId: m.id, RecallOptions(), .server), (.recall, "r", ["alice"], nil, "")),
            (.kick(app: h.app, roomId: "r", target: "alice", .server, notifyExt: ""), (.kick, "r", ["alice"], nil, "")),
            (.setRoomOpen(app: h.app, roomId: "r", false, .server, nim: nil), (.roomClose, "r", [], nil, "")),
            (.setRoomOpen(app: h.app, roomId: "r", true, .server, nim: nil), (.roomOpen, "r", [], nil, "")),
            (.editMessageList(app: h.app, .lowPriorityMessageTypes, add: true, ["RC:Like"]), (.messageListAdd, "", ["RC:Like"], nil, "lowPriorityMessageTypes")),
            (.editMessageList(app: h.app, .lowPriorityMessageTypes, add: false, ["RC:Like"]), (.messageListRemove, "", ["RC:Like"], nil, "lowPriorityMessageTypes")),
            (.setProtectedSenders(app: h.app, roomId: "r", add: true, ["bob"]), (.protectedSenderAdd, "r", ["bob"], nil, "")),
            (.setProtectedSenders(app: h.app, roomId: "r", add: false, ["bob"]), (.protectedSenderRemove, "r", ["bob"], nil, "")),
            // Last: the room goes, with its members (alice was kicked; host, the creator, is a fixed member).
            (.destroyRooms(app: h.app, ["r"]), (.roomDestroy, "r", ["bob", "boss", "host"], nil, "")),
        ]
        #expect(Set(server.map(\.1.0)) == Set(AuditAction.allCases), "every action kind is exercised")
        var id: Int64 = 1
        for (command, expected) in server {
            h.advance(seconds: 1)
            let before = all(h).count
            let out = h.run(command)
            #expect(out.succeeded, "\(command): \(String(describing: out.error))")
            let entries = all(h)
            #expect(entries.count == before + 1, "\(expected.0) must record exactly one entry")
            let e = try #require(entries.first)
            id += 1
            #expect(e.id == id && e.time == h.now && e.actor == AuditActor(kind: .server) && e.surface == .native)
            #expect(e.action == expected.0 && e.roomId == expected.roomId && e.targets == expected.targets && e.targetCount == expected.targets.count,
                    "\(e)")
            #expect(e.durationMs == expected.durationMs && e.detail == expected.detail, "\(e)")
            #expect(e.messageId == (expected.0 == .recall ? m.id : nil))
            #expect(out.mutations.contains(.appendAudit(app: h.app, e)), "the entry is a mutation of the command's outcome")
        }
    }

    @Test("MO-8: a member's op is recorded as that user through the client; a vendor's command names its surface; NIM's operator is the operator")
    func actorsAndSurfaces() throws {
        let (h, alice, _, boss) = room()
        h.advance(seconds: 3)
        #expect(h.run(.mute(app: h.app, roomId: "r", ["bob"], .seconds(60), .session(boss), rc: nil, nim: nil)).succeeded)
        var e = try #require(all(h).first)
        #expect(e.actor == AuditActor(kind: .user, userId: "boss") && e.surface == .client && e.action == .mute && e.targets == ["bob"]
                && e.durationMs == 60_000 && e.time == h.now)
        // A vendor's command (RongCloud's gag) as the app server.
        #expect(h.run(Command.block(app: h.app, roomId: "r", ["bob"], minutes: nil, .server, rc: nil, nim: nil).via(.rongCloud)).succeeded)
        e = try #require(all(h).first)
        #expect(e.actor == AuditActor(kind: .server) && e.surface == .rongCloud && e.action == .block && e.durationMs == nil)
        // NIM's operator (MO-7).
        #expect(h.run(Command.unblock(app: h.app, roomId: "r", ["bob"], .account("host"), rc: nil, nim: nil).via(.nim)).succeeded)
        e = try #require(all(h).first)
        #expect(e.actor == AuditActor(kind: .operator, userId: "host") && e.surface == .nim && e.action == .unblock)
        // NIM's recall with an operator through the app server; a member recalling its own message.
        let m1 = try #require(send(h, alice, "one")), m2 = try #require(send(h, alice, "two"))
        #expect(h.run(Command.recallMessage(app: h.app, roomId: "r", messageId: m1.id, RecallOptions(operatorId: "boss"), .server).via(.nim)).succeeded)
        e = try #require(all(h).first)
        #expect(e.actor == AuditActor(kind: .operator, userId: "boss") && e.surface == .nim && e.messageId == m1.id && e.targets == ["alice"])
        #expect(h.run(.recallMessage(app: h.app, roomId: "r", messageId: m2.id, RecallOptions(), .session(alice))).succeeded)
        e = try #require(all(h).first)
        #expect(e.actor == AuditActor(kind: .user, userId: "alice") && e.surface == .client && e.messageId == m2.id)
        // A non-moderation command is never wrapped, and records nothing.
        let count = all(h).count
        #expect(Command.createRoom(app: h.app, RoomConfig(roomId: "x")).via(.nexconn) == .createRoom(app: h.app, RoomConfig(roomId: "x")))
        #expect(h.createRoom("x").succeeded)
        #expect(all(h).count == count)
    }

    @Test("MO-8: room destroys, the app's message-type lists and a room's protected senders are recorded; repeating a no-op records nothing")
    func destroysListsAndProtectedSenders() {
        let (h, _, _, _) = room()
        let before = all(h).count
        #expect(h.run(.editMessageList(app: h.app, .lowPriorityMessageTypes, add: true, ["RC:Like", "RC:Gift"])).succeeded)
        #expect(h.run(.editMessageList(app: h.app, .lowPriorityMessageTypes, add: true, ["RC:Like"])).succeeded, "already there: nothing changes")
        #expect(h.run(.editMessageList(app: h.app, .lowPriorityMessageTypes, add: false, ["RC:Gift"])).succeeded)
        #expect(h.run(.setProtectedSenders(app: h.app, roomId: "r", add: true, ["alice"])).succeeded)
        #expect(h.run(.setProtectedSenders(app: h.app, roomId: "r", add: false, ["alice"])).succeeded)
        #expect(h.run(.destroyRooms(app: h.app, ["r"])).succeeded)
        let entries = all(h).prefix(all(h).count - before).reversed()
        #expect(entries.map(\.action) == [.messageListAdd, .messageListRemove, .protectedSenderAdd, .protectedSenderRemove, .roomDestroy])
        #expect(entries.first?.targets == ["RC:Like", "RC:Gift"] && entries.first?.detail == "lowPriorityMessageTypes")
        #expect(entries.last?.roomId == "r" && entries.last?.targets == ["alice", "bob", "boss", "host"], "\(String(describing: entries.last))")
        #expect(entries.allSatisfy { $0.actor.kind == .server && $0.surface == .native })
        // Refused: nothing recorded.
        let count = all(h).count
        #expect(h.run(.destroyRooms(app: h.app, ["r"])).error?.code == .roomNotFound)
        #expect(h.run(.setProtectedSenders(app: h.app, roomId: "nope", add: true, ["x"])).error != nil)
        #expect(all(h).count == count)
    }

    @Test("MO-8: a refused action (no right, bad input, unknown room or message) records nothing")
    func refusedActionsRecordNothing() throws {
        let (h, alice, bob, _) = room()
        let refused: [Command] = [
            .mute(app: h.app, roomId: "r", ["boss"], .seconds(60), .session(alice), rc: nil, nim: nil),   // not a manager
            .kick(app: h.app, roomId: "r", target: "alice", .session(bob), notifyExt: ""),
            .block(app: h.app, roomId: "r", ["bob"], minutes: 0, .server, rc: nil, nim: nil),             // bad minutes
            .mute(app: h.app, roomId: "nope", ["bob"], .minutes(1), .server, rc: nil, nim: nil),           // no such room
            .recallMessage(app: h.app, roomId: "r", messageId: "missing", RecallOptions(), .server),
            .editSensitiveWords(app: h.app, add: [SensitiveWord(word: "two words")], remove: []),
            .setRoomOpen(app: h.app, roomId: "r", false, .account("alice"), nim: nil),                     // only the creator
            Command.globalMute(app: h.app, [], minutes: 1, rc: nil).via(.rongCloud),
        ]
        for c in refused {
            let out = h.run(c)
            #expect(!out.succeeded, "\(c)")
            #expect(!out.mutations.contains { if case .appendAudit = $0 { return true } else { return false } })
        }
        #expect(all(h).map(\.action) == [.role], "only the set-up's entry")
    }

    @Test("MO-8: the trail keeps the newest auditEntriesPerApp entries, dropping the oldest first; strings and targets are bounded")
    func boundDropsOldest() throws {
        let h = Harness()
        let extra = 7
        for i in 0..<(Limits.auditEntriesPerApp + extra) {
            h.advance(seconds: 1)
            #expect(h.run(.globalMute(app: h.app, ["u\(i)"], minutes: 1, rc: nil)).succeeded)
        }
        let entries = all(h)
        #expect(entries.count == Limits.auditEntriesPerApp)
        #expect(entries.first?.id == Int64(Limits.auditEntriesPerApp + extra) && entries.last?.id == Int64(extra + 1))
        #expect(entries.last?.targets == ["u\(extra)"], "the oldest are gone")
        // Many targets (words: a call may name more than auditMaxTargets): at most
        // auditMaxTargets listed, all counted.
        let many = (0..<(Limits.auditMaxTargets + 5)).map { "w\($0)" }
        #expect(h.run(.editSensitiveWords(app: h.app, add: [], remove: many)).succeeded)
        let e = try #require(all(h).first)
        #expect(e.targets == Array(many.prefix(Limits.auditMaxTargets)) && e.targetCount == many.count)
        // A long string is cut on a character boundary.
        let long = String(repeating: "é", count: Limits.auditMaxStringBytes)
        let cut = AuditEntry.bounded(long)
        #expect(cut.utf8.count <= Limits.auditMaxStringBytes && cut.utf8.count > Limits.auditMaxStringBytes - 2 && long.hasPrefix(cut))
        #expect(AuditEntry.bounded("short") == "short")
    }

    @Test("MO-8: pages are newest first; before continues after the previous page; roomId filters; limit and before are checked")
    func paging() throws {
        let h = Harness()
        h.createRoom("a")
        h.createRoom("b")
        for i in 0..<9 {
            h.advance(seconds: 1)
            #expect(h.run(.setRoomMuted(app: h.app, roomId: i % 3 == 0 ? "b" : "a", i % 2 == 0, .server, rc: nil, nim: nil)).succeeded)
        }
        guard case .audit(let first, let next)? = h.query(.audit(app: h.app, roomId: nil, before: nil, limit: 4)) else { Issue.record("no page"); return }
        #expect(first.map(\.id) == [9, 8, 7, 6] && next == 6)
        guard case .audit(let second, let next2)? = h.query(.audit(app: h.app, roomId: nil, before: next, limit: 4)) else { Issue.record("no page"); return }
        #expect(second.map(\.id) == [5, 4, 3, 2] && next2 == 2)
        guard case .audit(let last, let end)? = h.query(.audit(app: h.app, roomId: nil, before: next2, limit: 4)) else { Issue.record("no page"); return }
        #expect(last.map(\.id) == [1] && end == nil)
        // Exactly a page left: no next.
        guard case .audit(let exact, let none)? = h.query(.audit(app: h.app, roomId: nil, before: 5, limit: 4)) else { Issue.record("no page"); return }
        #expect(exact.map(\.id) == [4, 3, 2, 1] && none == nil)
        #expect(all(h, roomId: "b").map(\.id) == [7, 4, 1])
        #expect(all(h, roomId: "b").allSatisfy { $0.roomId == "b" })
        for (q, field) in [(Query.audit(app: h.app, roomId: nil, before: nil, limit: 0), "limit"),
                           (.audit(app: h.app, roomId: nil, before: nil, limit: Limits.maxAuditPage + 1), "limit"),
                           (.audit(app: h.app, roomId: nil, before: 0, limit: 10), "before")] {
            let r = h.domain.query(q, now: h.now)
            guard case .failure(let e) = r else { Issue.record("\(q) was answered"); continue }
            #expect(e.code == .invalidParameter && e.field == field)
        }
    }

    @Test("MO-8: one app never sees another app's entries")
    func appsAreApart() throws {
        let h = Harness()
        #expect(h.run(.configureApp(app: "other", AppSettings())).succeeded)
        #expect(h.run(.globalMute(app: h.app, ["mine"], minutes: 1, rc: nil)).succeeded)
        #expect(h.run(.globalMute(app: "other", ["theirs"], minutes: 1, rc: nil)).succeeded)
        #expect(h.run(.globalMute(app: "other", ["theirs2"], minutes: 1, rc: nil)).succeeded)
        #expect(all(h).map(\.targets) == [["mine"]])
        #expect(all(h, app: "other").map(\.targets) == [["theirs2"], ["theirs"]])
        // Ids are per app: "before" of one app's page says nothing of another's.
        #expect(all(h).map(\.id) == [1] && all(h, app: "other").map(\.id) == [2, 1])
    }

    @Test("MO-8: the trail is in the domain's image (snapshots): a domain made from it pages the same and goes on numbering after it")
    func imageRoundTrip() throws {
        let (h, _, _, boss) = room()
        #expect(h.run(.kick(app: h.app, roomId: "r", target: "bob", .session(boss), notifyExt: "")).succeeded)
        #expect(h.run(Command.globalMute(app: h.app, ["x"], minutes: 3, rc: nil).via(.nexconn)).succeeded)
        let image = h.domain.image()
        let data = try JSONEncoder().encode(image)
        let back = try ChatDomain(image: JSONDecoder().decode(DomainImage.self, from: data), makeID: { "x" })
        #expect(back.image() == image)
        #expect(back.query(.audit(app: h.app, roomId: nil, before: nil, limit: 10), now: h.now) == h.domain.query(.audit(app: h.app, roomId: nil, before: nil, limit: 10), now: h.now))
        let out = back.apply(.globalUnmute(app: h.app, ["x"], rc: nil), now: h.now)
        guard case .appendAudit(_, let e)? = out.mutations.last else { Issue.record("no entry"); return }
        #expect(e.id == 4)
        // An image made before the trail existed has none.
        var old = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        var apps = try #require(old["apps"] as? [[String: Any]])
        for i in apps.indices { apps[i]["audit"] = nil }
        old["apps"] = apps
        let older = try ChatDomain(image: JSONDecoder().decode(DomainImage.self, from: JSONSerialization.data(withJSONObject: old)), makeID: { "x" })
        #expect(older.query(.audit(app: h.app, roomId: nil, before: nil, limit: 10), now: h.now) == .success(.audit([], next: nil)))
    }
}
