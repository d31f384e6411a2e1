import Testing
@testable import Chat

/// AU-1 (member tags) and AU-2 (messages to listed members) in the domain: who receives, who must
/// not, what history each reads, and bad input refused with its field named and nothing changed.
@Suite struct AudienceTests {
    /// A room with four members: vip (tags vip, cn), cn (cn), plain (none) and the sender (none).
    func taggedRoom() -> (Harness, vip: SessionID, cn: SessionID, plain: SessionID, sender: SessionID) {
        let h = Harness()
        h.createRoom("r")
        let vip = h.connect("vip"), cn = h.connect("cn"), plain = h.connect("plain"), sender = h.connect("sender")
        #expect(h.join(vip, "r", EnterProfile(tags: ["vip", "cn"])).succeeded)
        #expect(h.join(cn, "r", EnterProfile(tags: ["cn"])).succeeded)
        #expect(h.join(plain, "r").succeeded)
        #expect(h.join(sender, "r").succeeded)
        h.clearInboxes()
        return (h, vip, cn, plain, sender)
    }

    func send(_ h: Harness, _ s: SessionID, _ content: String, _ options: MessageOptions) -> Outcome {
        h.run(.sendMessage(app: h.app, roomId: "r", .session(s), .text, content: content, options: options))
    }

    @Test("AU-1: a message to a tag expression reaches the matching members only")
    func tagExpressionsChooseTheRecipients() {
        let (h, vip, cn, plain, sender) = taggedRoom()
        #expect(send(h, sender, "to vip", MessageOptions(targetTags: .tag("vip"))).succeeded)
        #expect(h.received(vip).messages.map(\.content) == ["to vip"])
        #expect(h.received(cn).messages.isEmpty)
        #expect(h.received(plain).messages.isEmpty)
        #expect(h.received(sender).messages.isEmpty)

        h.clearInboxes()
        #expect(send(h, sender, "cn not vip", MessageOptions(targetTags: .and([.tag("cn"), .not(.tag("vip"))]))).succeeded)
        #expect(h.received(vip).messages.isEmpty)
        #expect(h.received(cn).messages.map(\.content) == ["cn not vip"])
        #expect(h.received(plain).messages.isEmpty)

        h.clearInboxes()
        #expect(send(h, sender, "untagged", MessageOptions(targetTags: .not(.or([.tag("cn"), .tag("vip")])))).succeeded)
        #expect(h.received(plain).messages.map(\.content) == ["untagged"])
        #expect(h.received(vip).messages.isEmpty && h.received(cn).messages.isEmpty)
        // The sender matches too (no tags) but a message never echoes to its connection.
        #expect(h.received(sender).messages.isEmpty)
    }

    @Test("AU-2: a message to listed members reaches them only, and only they read it in history")
    func listedMembersOnly() {
        let (h, vip, cn, plain, sender) = taggedRoom()
        let second = h.connect("plain", device: "tablet")
        #expect(h.join(second, "r").succeeded)
        h.clearInboxes()
        #expect(send(h, sender, "for plain and cn", MessageOptions(targets: ["plain", "cn"])).succeeded)
        #expect(h.received(plain).messages.map(\.content) == ["for plain and cn"])
        #expect(h.received(second).messages.map(\.content) == ["for plain and cn"])
        #expect(h.received(cn).messages.map(\.content) == ["for plain and cn"])
        #expect(h.received(vip).messages.isEmpty)
        #expect(h.received(sender).messages.isEmpty)
        #expect(send(h, sender, "for all", MessageOptions()).succeeded)

        func history(_ viewer: SessionID?) -> [String] {
            guard case .messages(let list)? = h.query(.history(app: h.app, roomId: "r", start: 0, limit: 100, .ascending, kinds: [],
                                                               filter: HistoryFilter(viewer: viewer))) else { return ["query failed"] }
            return list.map(\.content)
        }
        #expect(history(plain) == ["for plain and cn", "for all"])
        #expect(history(vip) == ["for all"])
        // The sender reads what it sent; the app server reads everything.
        #expect(history(sender) == ["for plain and cn", "for all"])
        #expect(history(nil) == ["for plain and cn", "for all"])
    }

    @Test("AU-1: history by tag and a member's history follow the tags it was sent to")
    func historyByTag() {
        let (h, vip, cn, plain, sender) = taggedRoom()
        #expect(send(h, sender, "vip only", MessageOptions(targetTags: .tag("vip"))).succeeded)
        #expect(send(h, sender, "cn only", MessageOptions(targetTags: .tag("cn"))).succeeded)
        #expect(send(h, sender, "all", MessageOptions()).succeeded)
        func history(_ viewer: SessionID?, tags: [String] = []) -> [String] {
            guard case .messages(let list)? = h.query(.history(app: h.app, roomId: "r", start: 0, limit: 100, .ascending, kinds: [],
                                                               filter: HistoryFilter(viewer: viewer, tags: tags))) else { return ["query failed"] }
            return list.map(\.content)
        }
        #expect(history(nil, tags: ["vip"]) == ["vip only"])
        #expect(history(nil, tags: ["cn"]) == ["cn only"])
        #expect(history(nil, tags: ["vip", "cn"]) == ["vip only", "cn only"])
        #expect(history(vip) == ["vip only", "cn only", "all"])
        #expect(history(cn) == ["cn only", "all"])
        #expect(history(plain) == ["all"])
    }

    @Test("AU-1: the app server's tag change moves a member between audiences, told to its own sessions")
    func retaggingMovesTheMember() {
        let (h, vip, cn, plain, sender) = taggedRoom()
        #expect(h.run(.setMemberTags(app: h.app, roomId: "r", userId: "plain", ["vip"], notifyTargetTags: .tag("cn"))).succeeded)
        // Plain is told its tags; the cn members get the 316 notification; vip (not cn) gets nothing.
        #expect(h.received(plain).contains { if case .tagsUpdated(let e) = $0 { return e.tags == ["vip"] } else { return false } })
        #expect(h.received(cn).notifications.map(\.type) == [.memberInfoUpdated])
        #expect(h.received(vip).notifications.map(\.type) == [.memberInfoUpdated])
        #expect(h.received(sender).isEmpty)
        h.clearInboxes()
        #expect(send(h, sender, "vip", MessageOptions(targetTags: .tag("vip"))).succeeded)
        #expect(h.received(plain).messages.count == 1)
        #expect(h.received(vip).messages.count == 1)
        #expect(h.received(cn).messages.isEmpty)
        #expect(h.query(.tagMembersCount(app: h.app, roomId: "r", tag: "vip")) == .count(2))
        #expect(h.query(.tagMembersCount(app: h.app, roomId: "r", tag: "cn")) == .count(2))
        guard case .members(let list, let total)? = h.query(.tagMembers(app: h.app, roomId: "r", tag: "vip", limit: 10, after: nil)) else {
            Issue.record("tagMembers failed")
            return
        }
        #expect(Set(list.map(\.userId)) == ["vip", "plain"] && total == 2)
        // Leaving takes the member out of the tag's count.
        h.leave(vip, "r")
        #expect(h.query(.tagMembersCount(app: h.app, roomId: "r", tag: "vip")) == .count(1))
        #expect(h.query(.tagMembersCount(app: h.app, roomId: "r", tag: "cn")) == .count(1))
    }

    @Test("AU-1: the enter and exit notifications of a member with notifyTargetTags reach the matching members only")
    func notifyTargetTagsOnEntry() {
        let (h, vip, cn, plain, _) = taggedRoom()
        let late = h.connect("late")
        #expect(h.join(late, "r", EnterProfile(tags: ["cn"], notifyTargetTags: .tag("vip"))).succeeded)
        #expect(h.received(vip).notifications.map(\.type) == [.enter])
        #expect(h.received(cn).notifications.isEmpty)
        #expect(h.received(plain).notifications.isEmpty)
        h.clearInboxes()
        h.leave(late, "r")
        #expect(h.received(vip).notifications.map(\.type) == [.exit])
        #expect(h.received(cn).notifications.isEmpty)
    }

    @Test("AU-1: a tag mute silences the tag's members for its duration, including members who enter with the tag")
    func tagMute() {
        let (h, vip, cn, plain, _) = taggedRoom()
        #expect(h.run(.tagMute(app: h.app, roomId: "r", tag: "cn", seconds: 60, notify: NIMNotify(notifyExt: "n"), notifyTargetTags: nil, .server)).succeeded)
        // The notification went to the cn members only.
        #expect(h.received(vip).notifications.map(\.type) == [.tempMuteAdd])
        #expect(h.received(cn).notifications.map(\.type) == [.tempMuteAdd])
        #expect(h.received(plain).notifications.isEmpty)
        #expect(send(h, cn, "x", MessageOptions()).error?.code == .muted)
        #expect(send(h, vip, "x", MessageOptions()).error?.code == .muted)
        #expect(send(h, plain, "x", MessageOptions()).succeeded)
        let newcomer = h.connect("newcomer")
        #expect(h.join(newcomer, "r", EnterProfile(tags: ["cn"])).succeeded)
        #expect(send(h, newcomer, "x", MessageOptions()).error?.code == .muted)
        h.advance(seconds: 61)
        h.tick()
        #expect(send(h, cn, "x", MessageOptions()).succeeded)
        #expect(send(h, newcomer, "x", MessageOptions()).succeeded)
    }

    @Test("AU-1, AU-2: bad tags, expressions and lists are refused with the field named, and change nothing")
    func badInputChangesNothing() {
        let (h, _, _, plain, sender) = taggedRoom()
        let before = h.fingerprint("r")
        let tooMany = (0...Limits.maxTagsPerMember).map { "t\($0)" }
        let late = h.connect("late")
        #expect(h.join(late, "r", EnterProfile(tags: tooMany)).error?.field == "tags")
        #expect(h.join(late, "r", EnterProfile(tags: [String(repeating: "x", count: Limits.maxTagBytes + 1)])).error?.field == "tags")
        #expect(h.join(late, "r", EnterProfile(tags: [""])).error?.field == "tags")
        var deep: TagExpression = .tag("a")
        for _ in 0..<Limits.maxTagExpressionDepth { deep = .not(deep) }
        #expect(h.join(late, "r", EnterProfile(notifyTargetTags: deep)).error?.field == "notifyTargetTags")
        let wide: TagExpression = .or((0...Limits.maxTagExpressionTerms).map { .tag("t\($0)") })
        #expect(send(h, sender, "x", MessageOptions(targetTags: wide)).error?.field == "targetTags")
        #expect(send(h, sender, "x", MessageOptions(targetTags: deep)).error?.field == "targetTags")
        let users = (0...Limits.maxMessageTargets).map { "u\($0)" }
        #expect(send(h, sender, "x", MessageOptions(targets: users)).error?.field == "targets")
        #expect(send(h, sender, "x", MessageOptions(targets: ["plain"], targetTags: .tag("vip"))).error?.field == "targetTags")
        #expect(h.run(.setMemberTags(app: h.app, roomId: "r", userId: "plain", tooMany)).error?.field == "tags")
        #expect(h.run(.setMemberTags(app: h.app, roomId: "r", userId: "nobody", ["a"])).error?.field == "userId")
        #expect(h.run(.tagMute(app: h.app, roomId: "r", tag: "cn", seconds: Limits.maxTagMuteSeconds + 1, notify: nil, notifyTargetTags: nil, .server))
            .error?.field == "muteDuration")
        #expect(h.fingerprint("r") == before)
        #expect(h.received(plain).isEmpty)
        #expect(h.query(.tagMembersCount(app: h.app, roomId: "r", tag: "cn")) == .count(2))
    }

    @Test("AU-1: a room's tag index is bounded; a join or a change past it is refused")
    func tagIndexIsBounded() {
        let h = Harness()
        h.createRoom("r")
        var n = 0
        // Fill the index with members of ten distinct tags each.
        while n < Limits.maxTagsPerRoom {
            let s = h.connect("u\(n)")
            let tags = (n..<min(n + Limits.maxTagsPerMember, Limits.maxTagsPerRoom)).map { "t\($0)" }
            #expect(h.join(s, "r", EnterProfile(tags: tags)).succeeded)
            n += tags.count
        }
        let over = h.connect("over")
        #expect(h.join(over, "r", EnterProfile(tags: ["new"])).error?.code == .limitExceeded)
        // Existing tags still join.
        #expect(h.join(over, "r", EnterProfile(tags: ["t0"])).succeeded)
        #expect(h.run(.setMemberTags(app: h.app, roomId: "r", userId: "over", ["another"])).error?.field == "tags")
    }
}
