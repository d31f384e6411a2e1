import Testing
@testable import Chat

/// Messages in ultra-group channels (Nexconn community channels): sends, edits and metadata
/// (MO-3), mute lists, allowed senders and freezes (MO-5), history (MO-6).
@Suite("Community messages and controls (MO-3, MO-5, MO-6)")
struct CommunityTests {
    /// Group g1: alice (creator), bob, carol; channel "vip" is private with only bob on its list;
    /// dave is online and in no group. Everyone is connected once.
    func setUp() -> (Harness, alice: SessionID, bob: SessionID, carol: SessionID, dave: SessionID) {
        let h = Harness()
        #expect(h.run(.createGroup(app: h.app, groupId: "g1", name: "Guild", creator: "alice")).succeeded)
        #expect(h.run(.joinGroup(app: h.app, groupId: "g1", ["bob", "carol"])).succeeded)
        #expect(h.run(.createChannel(app: h.app, groupId: "g1", channelId: "vip", .private)).succeeded)
        #expect(h.run(.addPrivateMembers(app: h.app, groupId: "g1", channelId: "vip", ["bob"])).succeeded)
        let a = h.connect("alice"), b = h.connect("bob"), c = h.connect("carol"), d = h.connect("dave")
        h.clearInboxes()
        return (h, a, b, c, d)
    }

    func send(_ h: Harness, _ channel: String = "RCDefault", from: String = "alice", _ content: String = "hi", groups: [String] = ["g1"],
              stored: Bool = true, targets: [String] = [], metadata: [String: String]? = nil, actor: Actor = .server) -> Outcome {
        h.run(.sendCommunityMessage(app: h.app, groupIds: groups, channelId: channel,
                                    CommunityDraft(fromUserId: from, type: "RC:TxtMsg", content: content, stored: stored, targets: targets, metadata: metadata),
                                    actor))
    }

    func sent(_ out: Outcome) -> [CommunityMessage] {
        if case .success(.communityMessages(let list)) = out.reply { return list }
        return []
    }

    func messages(_ h: Harness, _ s: SessionID) -> [CommunityMessage] {
        h.received(s).compactMap { if case .communityMessage(let m) = $0 { return m } else { return nil } }
    }

    func updates(_ h: Harness, _ s: SessionID) -> [CommunityUpdateEvent] {
        h.received(s).compactMap { if case .communityMessageUpdated(let e) = $0 { return e } else { return nil } }
    }

    func rulesEvents(_ h: Harness, _ s: SessionID) -> [CommunityRulesEvent] {
        h.received(s).compactMap { if case .communityRulesChanged(let e) = $0 { return e } else { return nil } }
    }

    func history(_ h: Harness, channel: String? = nil, viewer: String? = nil, oldest: Int64? = nil, newest: Int64? = nil,
                 includeOldest: Bool = true, includeNewest: Bool = true, limit: Int = 100, newestFirst: Bool = false) -> Result<[CommunityMessage], ChatError> {
        let q = CommunityHistoryQuery(channelId: channel, viewer: viewer, oldest: oldest ?? h.now - 86_400_000, newest: newest ?? h.now,
                                      includeOldest: includeOldest, includeNewest: includeNewest, limit: limit, newestFirst: newestFirst)
        switch h.domain.query(.communityHistory(app: h.app, groupId: "g1", q), now: h.now) {
        case .success(.communityMessages(let list)): return .success(list)
        case .success(let other): Issue.record("unexpected \(other)"); return .success([])
        case .failure(let e): return .failure(e)
        }
    }

    /// Everything the channel keeps (not one page of it).
    func stored(_ h: Harness, channel: String = "RCDefault") -> [CommunityMessage] {
        h.domain.apps[h.app]?.groups["g1"]?.community.history[channel] ?? []
    }

    // MARK: MO-3 sends

    @Test("MO-3: a server send reaches everyone who sees the channel, and nobody else")
    func aSendReachesWhoSeesTheChannel() throws {
        let (h, a, b, c, d) = setUp()
        let out = send(h, "RCDefault", from: "alice", "hello")
        let m = try #require(sent(out).first)
        #expect(m.groupId == "g1" && m.channelId == "RCDefault" && m.fromUserId == "alice" && m.fromServer && m.sentAt == h.now)
        for s in [a, b, c] { #expect(messages(h, s).map(\.messageId) == [m.messageId]) }
        #expect(messages(h, d).isEmpty, "dave is not a member of g1")
        #expect(out.mutations.contains(.putCommunityMessage(app: h.app, m)))

        h.clearInboxes()
        let vip = try #require(sent(send(h, "vip", from: "alice", "secret")).first)
        #expect(messages(h, b).map(\.messageId) == [vip.messageId])
        for s in [a, c, d] { #expect(messages(h, s).isEmpty, "only vip's private list sees it") }
    }

    @Test("MO-3: a message for some members reaches only them; an unstored one is not in history")
    func targetsAndUnstored() throws {
        let (h, a, b, c, _) = setUp()
        let m = try #require(sent(send(h, targets: ["carol"])).first)
        #expect(messages(h, c).map(\.messageId) == [m.messageId])
        #expect(messages(h, a).map(\.messageId) == [m.messageId], "the sender's own devices get a server send")
        #expect(messages(h, b).isEmpty)
        #expect(try history(h, viewer: "bob").get().isEmpty, "bob may not see it in history either")
        #expect(try history(h, viewer: "carol").get().map(\.messageId) == [m.messageId])

        let transient = send(h, "RCDefault", "live only", stored: false)
        #expect(sent(transient).first?.stored == false)
        #expect(!transient.mutations.contains { if case .putCommunityMessage = $0 { return true } else { return false } })
        #expect(stored(h).map(\.messageId) == [m.messageId])
        // Several groups with targets is refused; targets must be valid ids.
        h.run(.createGroup(app: h.app, groupId: "g2", name: "Other", creator: "alice"))
        #expect(send(h, groups: ["g1", "g2"], targets: ["bob"]).error?.field == "targets")
        #expect(send(h, targets: ["a/b"]).error?.field == "targets")
    }

    @Test("MO-3: a send to several groups is all or none, at most three")
    func severalGroupsAllOrNone() {
        let (h, a, _, _, _) = setUp()
        h.run(.createGroup(app: h.app, groupId: "g2", name: "Two", creator: "alice"))
        h.clearInboxes()
        let missing = send(h, groups: ["g1", "nope"])
        #expect(missing.error?.code == .notFound && missing.error?.field == "groupId")
        #expect(missing.mutations.isEmpty && missing.effects.isEmpty)
        #expect(messages(h, a).isEmpty)
        let both = send(h, groups: ["g1", "g2"])
        #expect(sent(both).map(\.groupId) == ["g1", "g2"])
        #expect(messages(h, a).count == 2)
        #expect(send(h, groups: ["g1", "g2", "g3", "g4"]).error?.field == "groupIds")
        #expect(send(h, groups: ["g1", "g1"]).error?.field == "groupIds")
        #expect(send(h, "nochannel").error?.field == "channelId")
        #expect(send(h, "RCDefault", "").error?.field == "content")
    }

    // MARK: MO-3 edits and metadata

    @Test("MO-3: only the sender edits; message.updated reaches who sees it; history shows the latest version")
    func edits() throws {
        let (h, a, b, c, d) = setUp()
        let m = try #require(sent(send(h, from: "bob", "first")).first)
        h.clearInboxes()
        let stranger = h.run(.community(app: h.app, groupId: "g1", .edit(channelId: "RCDefault", messageId: m.messageId, fromUserId: "carol",
                                                                          content: "hijack"), .server))
        #expect(stranger.error?.code == .permissionDenied && stranger.error?.field == "fromUserId")
        #expect(stranger.mutations.isEmpty && stranger.effects.isEmpty)

        h.advance(seconds: 5)
        let edit = h.run(.community(app: h.app, groupId: "g1", .edit(channelId: "RCDefault", messageId: m.messageId, fromUserId: "bob",
                                                                      content: "second"), .server))
        #expect(edit.succeeded)
        for s in [a, b, c] {
            let e = try #require(updates(h, s).first)
            #expect(e.change == "content" && e.message.content == "second" && e.message.version == 1 && e.message.editedAt == h.now)
        }
        #expect(updates(h, d).isEmpty)
        let kept = stored(h)
        #expect(kept.map(\.content) == ["second"] && kept.first?.sentAt == m.sentAt)
        let missing = h.run(.community(app: h.app, groupId: "g1", .edit(channelId: "RCDefault", messageId: "nope", fromUserId: "bob", content: "x"),
                                       .server))
        #expect(missing.error?.code == .notFound && missing.error?.field == "messageId")
    }

    @Test("MO-3: metadata on a message sent with it: set, bounded, removed, each entry with its time")
    func metadata() throws {
        let (h, a, _, _, d) = setUp()
        let plain = try #require(sent(send(h)).first)
        let refused = h.run(.community(app: h.app, groupId: "g1", .setMetadata(channelId: "RCDefault", messageId: plain.messageId, userId: "bob",
                                                                                ["k": "v"]), .server))
        #expect(refused.error?.field == "messageId", "sent without metadata")

        let m = try #require(sent(send(h, metadata: ["likes": "0"])).first)
        #expect(m.metadata == [CommunityMetadataEntry(key: "likes", value: "0", updatedAt: h.now)])
        h.clearInboxes()
        h.advance(seconds: 1)
        let set = h.run(.community(app: h.app, groupId: "g1", .setMetadata(channelId: "RCDefault", messageId: m.messageId, userId: "bob",
                                                                            ["likes": "1", "flag": "red"]), .server))
        guard case .success(.communityMessage(let updated)) = set.reply else { Issue.record("\(set.reply)"); return }
        #expect(updated.metadata?.map(\.key) == ["flag", "likes"] && updated.metadata?.allSatisfy { $0.updatedAt == h.now } == true)
        #expect(updates(h, a).first?.change == "metadata" && updates(h, a).first?.operatorId == "bob")
        #expect(updates(h, d).isEmpty)

        for bad in ["", String(repeating: "k", count: Limits.maxMetadataKeyChars + 1), "a b", "ü"] {
            let out = h.run(.community(app: h.app, groupId: "g1", .setMetadata(channelId: "RCDefault", messageId: m.messageId, userId: "bob", [bad: "v"]),
                                       .server))
            #expect(out.error?.field == "metadata" && out.mutations.isEmpty, "key \(bad)")
        }
        let big = h.run(.community(app: h.app, groupId: "g1", .setMetadata(channelId: "RCDefault", messageId: m.messageId, userId: "bob",
                                                                            ["v": String(repeating: "x", count: Limits.maxMetadataValueBytes + 1)]), .server))
        #expect(big.error?.field == "metadata")
        // Past the per-message bound, in batches within the per-call one: nothing of the last batch lands.
        var filled = 2
        while filled + Limits.maxMetadataEntriesPerCall <= Limits.maxMetadataEntriesPerMessage {
            let batch = Dictionary(uniqueKeysWithValues: (0..<Limits.maxMetadataEntriesPerCall).map { ("k\(filled + $0)", "v") })
            #expect(h.run(.community(app: h.app, groupId: "g1", .setMetadata(channelId: "RCDefault", messageId: m.messageId, userId: "u", batch),
                                     .server)).succeeded)
            filled += Limits.maxMetadataEntriesPerCall
        }
        let over = Dictionary(uniqueKeysWithValues: (0..<(Limits.maxMetadataEntriesPerMessage - filled + 1)).map { ("x\($0)", "v") })
        let past = h.run(.community(app: h.app, groupId: "g1", .setMetadata(channelId: "RCDefault", messageId: m.messageId, userId: "u", over), .server))
        #expect(past.error?.code == .limitExceeded && past.mutations.isEmpty)

        let removed = h.run(.community(app: h.app, groupId: "g1", .removeMetadata(channelId: "RCDefault", messageId: m.messageId, userId: "bob",
                                                                                   keys: ["flag", "absent"]), .server))
        guard case .success(.communityMessage(let after)) = removed.reply else { Issue.record("\(removed.reply)"); return }
        #expect(after.metadata?.contains { $0.key == "flag" } == false && after.metadata?.contains { $0.key == "likes" } == true)
        guard case .success(.communityMessage(let read)) = h.domain.query(.communityMessage(app: h.app, groupId: "g1", channelId: "RCDefault",
                                                                                             messageId: m.messageId), now: h.now) else {
            Issue.record("no message")
            return
        }
        #expect(read == after)
    }

    @Test("MO-1, MO-3: the app server recalls a community message: a tombstone in history, who saw it is told, nothing more can change it")
    func recall() throws {
        let (h, a, b, c, d) = setUp()
        let m = try #require(sent(send(h, from: "bob", "oops", metadata: ["k": "v"])).first)
        h.clearInboxes()
        let wrongSender = h.run(.community(app: h.app, groupId: "g1", .recall(channelId: "RCDefault", messageId: m.messageId, fromUserId: "carol",
                                                                               sentAt: nil), .server))
        #expect(wrongSender.error?.field == "fromUserId" && wrongSender.mutations.isEmpty)
        let wrongTime = h.run(.community(app: h.app, groupId: "g1", .recall(channelId: "RCDefault", messageId: m.messageId, fromUserId: "bob",
                                                                             sentAt: m.sentAt + 1), .server))
        #expect(wrongTime.error?.field == "sentTime" && wrongTime.mutations.isEmpty)
        let out = h.run(.community(app: h.app, groupId: "g1", .recall(channelId: "RCDefault", messageId: m.messageId, fromUserId: "bob",
                                                                       sentAt: m.sentAt), .server))
        #expect(out.succeeded)
        for s in [a, b, c] {
            let e = try #require(updates(h, s).first)
            #expect(e.change == "recalled" && e.message.recalled == true && e.message.content.isEmpty && e.message.metadata == [])
        }
        #expect(updates(h, d).isEmpty)
        #expect(stored(h).first?.recalled == true && stored(h).first?.content == "")
        let again = h.run(.community(app: h.app, groupId: "g1", .recall(channelId: "RCDefault", messageId: m.messageId, fromUserId: "bob", sentAt: nil),
                                     .server))
        #expect(again.error?.code == .notFound)
        let edit = h.run(.community(app: h.app, groupId: "g1", .edit(channelId: "RCDefault", messageId: m.messageId, fromUserId: "bob", content: "x"),
                                    .server))
        #expect(edit.error?.code == .notFound && edit.mutations.isEmpty)
        let meta = h.run(.community(app: h.app, groupId: "g1", .setMetadata(channelId: "RCDefault", messageId: m.messageId, userId: "bob", ["k": "w"]),
                                    .server))
        #expect(meta.error?.code == .notFound && meta.mutations.isEmpty)
    }

    @Test("MO-1, MO-3, MO-5: webhooks are told of each community send, edit, metadata change, recall and control; an unstored message only with transientWebhooks")
    func webhooks() throws {
        let (h, _, b, _, _) = setUp()
        let out = send(h, from: "alice", "hello", targets: ["bob"], metadata: ["k": "v"])
        let m = try #require(sent(out).first)
        #expect(out.webhooks == [WebhookRecord(app: h.app, type: .groupMessageSent, roomId: "", userIds: ["alice"], time: h.now,
                                               details: ["groupId": "g1", "channelId": "RCDefault", "messageId": m.messageId, "type": "RC:TxtMsg",
                                                         "content": "hello", "fromServer": "true", "targets": "bob"])])
        let member = send(h, "vip", from: "bob", "psst", actor: .session(b))
        #expect(member.webhooks.map(\.type) == [.groupMessageSent] && member.webhooks.first?.details["fromServer"] == "false"
                && member.webhooks.first?.details["channelId"] == "vip")
        #expect(send(h, stored: false).webhooks.isEmpty, "an unstored message is told only with transientWebhooks")
        var patch = AppSettingsPatch()
        patch.transientWebhooks = true
        #expect(h.run(.updateAppSettings(app: h.app, patch)).succeeded)
        #expect(send(h, stored: false).webhooks.first?.details["stored"] == "false")
        // A refused send tells nobody.
        #expect(send(h, "nope").webhooks.isEmpty)

        let edit = h.run(.community(app: h.app, groupId: "g1", .edit(channelId: "RCDefault", messageId: m.messageId, fromUserId: "alice",
                                                                      content: "hello!"), .server))
        #expect(edit.webhooks == [WebhookRecord(app: h.app, type: .groupMessageUpdated, roomId: "", userIds: ["alice"], time: h.now,
                                                details: ["groupId": "g1", "channelId": "RCDefault", "messageId": m.messageId, "change": "content",
                                                          "operator": "alice", "version": "1", "content": "hello!"])])
        let meta = h.run(.community(app: h.app, groupId: "g1", .setMetadata(channelId: "RCDefault", messageId: m.messageId, userId: "bob", ["k": "w"]),
                                    .server))
        #expect(meta.webhooks.map { [$0.details["change"], $0.details["operator"]] } == [["metadata", "bob"]])
        let recall = h.run(.community(app: h.app, groupId: "g1", .recall(channelId: "RCDefault", messageId: m.messageId, fromUserId: "alice",
                                                                          sentAt: nil), .server))
        #expect(recall.webhooks.map(\.type) == [.groupMessageUpdated] && recall.webhooks.first?.details["change"] == "recalled"
                && recall.webhooks.first?.details["content"] == nil)
        let again = h.run(.community(app: h.app, groupId: "g1", .recall(channelId: "RCDefault", messageId: m.messageId, fromUserId: "alice",
                                                                         sentAt: nil), .server))
        #expect(again.error != nil && again.webhooks.isEmpty)

        let mute = h.run(.community(app: h.app, groupId: "g1", .editList(.muted, channelId: "vip", add: true, users: ["bob"]), .server))
        #expect(mute.webhooks == [WebhookRecord(app: h.app, type: .moderationChanged, roomId: "", userIds: ["bob"], time: h.now,
                                                details: ["action": "muteAdd", "groupId": "g1", "channelId": "vip"])])
        let unchanged = h.run(.community(app: h.app, groupId: "g1", .editList(.muted, channelId: "vip", add: true, users: ["bob"]), .server))
        #expect(unchanged.succeeded && unchanged.webhooks.isEmpty, "nothing changed, nothing told")
        let freeze = h.run(.community(app: h.app, groupId: "g1", .setFrozen(channelId: "", true), .server))
        #expect(freeze.webhooks == [WebhookRecord(app: h.app, type: .moderationChanged, roomId: "", time: h.now,
                                                  details: ["action": "freeze", "groupId": "g1", "channelId": ""])])
    }

    @Test("MO-4: an app holds at most maxUltraGroupsPerApp ultra groups and a group maxUltraGroupMembers members; past either nothing changes (41901)")
    func groupBounds() {
        let h = Harness()
        for i in 0..<Limits.maxUltraGroupsPerApp {
            h.run(.createGroup(app: h.app, groupId: "g\(i)", name: "", creator: nil))
        }
        #expect(h.domain.apps[h.app]?.groups.count == Limits.maxUltraGroupsPerApp)
        let tooMany = h.run(.createGroup(app: h.app, groupId: "one-more", name: "", creator: nil))
        #expect(tooMany.error?.code == .limitExceeded && tooMany.error?.field == "groupId" && tooMany.mutations.isEmpty)

        let perCall = Limits.maxGroupUsersPerCall
        for call in 0..<(Limits.maxUltraGroupMembers / perCall) {
            h.run(.joinGroup(app: h.app, groupId: "g0", (0..<perCall).map { "u\(call * perCall + $0)" }))
        }
        #expect(h.domain.apps[h.app]?.groups["g0"]?.members.count == Limits.maxUltraGroupMembers)
        let full = h.run(.joinGroup(app: h.app, groupId: "g0", ["u0", "newcomer"]))
        #expect(full.error?.code == .limitExceeded && full.error?.field == "userIds" && full.mutations.isEmpty)
        #expect(h.domain.apps[h.app]?.groups["g0"]?.members.contains("newcomer") == false)
        #expect(h.run(.joinGroup(app: h.app, groupId: "g0", ["u0", "u1"])).succeeded, "members already in it add nothing")
    }

    @Test("MO-3: updates reach only who may see the message: a private channel's list, a targeted message's addressees and sender")
    func updatesKeepTheAudience() throws {
        let (h, a, b, c, d) = setUp()
        let vip = try #require(sent(send(h, "vip", from: "bob", "secret", metadata: [:])).first)
        let targeted = try #require(sent(send(h, "RCDefault", from: "alice", "for carol", targets: ["carol"])).first)
        h.clearInboxes()
        #expect(h.run(.community(app: h.app, groupId: "g1", .setMetadata(channelId: "vip", messageId: vip.messageId, userId: "bob", ["k": "v"]),
                                 .server)).succeeded)
        #expect(updates(h, b).count == 1)
        for s in [a, c, d] { #expect(updates(h, s).isEmpty, "only vip's list sees its messages") }
        h.clearInboxes()
        #expect(h.run(.community(app: h.app, groupId: "g1", .edit(channelId: "RCDefault", messageId: targeted.messageId, fromUserId: "alice",
                                                               content: "edited"), .server)).succeeded)
        #expect(updates(h, a).count == 1 && updates(h, c).count == 1)
        for s in [b, d] { #expect(updates(h, s).isEmpty, "bob was not addressed") }
        h.clearInboxes()
        #expect(h.run(.community(app: h.app, groupId: "g1", .recall(channelId: "vip", messageId: vip.messageId, fromUserId: "bob", sentAt: nil),
                                 .server)).succeeded)
        #expect(updates(h, b).first?.change == "recalled")
        for s in [a, c, d] { #expect(updates(h, s).isEmpty) }
    }

    @Test("MO-2, MO-3: a member's text is screened for sensitive words (blocked: 21501, nobody receives it; replaced: delivered replaced)")
    func screened() throws {
        let (h, a, b, c, _) = setUp()
        #expect(h.run(.editSensitiveWords(app: h.app, add: [SensitiveWord(word: "bad"), SensitiveWord(word: "meh", replacement: "***")], remove: []))
            .succeeded)
        h.clearInboxes()
        let blocked = h.run(.sendCommunityMessage(app: h.app, groupIds: ["g1"], channelId: "RCDefault",
                                                  CommunityDraft(fromUserId: "", type: "RC:TxtMsg", content: "so bad"), .session(c)))
        #expect(blocked.error?.code == .sensitiveWordBlocked && blocked.mutations.isEmpty && blocked.effects.isEmpty)
        let replaced = h.run(.sendCommunityMessage(app: h.app, groupIds: ["g1"], channelId: "RCDefault",
                                                   CommunityDraft(fromUserId: "", type: "RC:TxtMsg", content: "meh"), .session(c)))
        #expect(sent(replaced).first?.content == "***")
        #expect(messages(h, a).map(\.content) == ["***"] && messages(h, b).map(\.content) == ["***"])
        // A custom type is not screened; nor the app server's text unless the app asks.
        #expect(h.run(.sendCommunityMessage(app: h.app, groupIds: ["g1"], channelId: "RCDefault",
                                            CommunityDraft(fromUserId: "", type: "App:Custom", content: "bad"), .session(c))).succeeded)
        #expect(send(h, "RCDefault", "bad").succeeded)
    }

    @Test("MO-3: metadata and edits keep the channel within its bytes: the oldest other messages go")
    func growthKeepsTheBound() throws {
        let (h, _, _, _, _) = setUp()
        var settings = AppSettings()
        settings.maxMessageBytes = 1_048_576
        h.run(.configureApp(app: h.app, settings))
        let big = String(repeating: "x", count: 1_000_000)
        for _ in 0..<3 { #expect(send(h, "RCDefault", big).succeeded) }
        let small = try #require(sent(send(h, "RCDefault", "tiny", metadata: [:])).first)
        var total = stored(h).reduce(0) { $0 + $1.content.utf8.count }
        #expect(total <= Limits.maxCommunityHistoryBytesPerChannel)
        // Grow the small message by metadata until the channel would pass its bound.
        var round = 0
        while total + 100 * Limits.maxMetadataValueBytes <= Limits.maxCommunityHistoryBytesPerChannel + 2_000_000 && round < 3 {
            let batch = Dictionary(uniqueKeysWithValues: (0..<Limits.maxMetadataEntriesPerCall).map { ("r\(round)k\($0)", String(repeating: "v", count: Limits.maxMetadataValueBytes)) })
            let out = h.run(.community(app: h.app, groupId: "g1", .setMetadata(channelId: "RCDefault", messageId: small.messageId, userId: "u", batch), .server))
            #expect(out.succeeded)
            round += 1
            total = stored(h).reduce(0) { $0 + $1.content.utf8.count + ($1.metadata ?? []).reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count } }
            #expect(total <= Limits.maxCommunityHistoryBytesPerChannel, "round \(round): \(total) bytes")
        }
        #expect(stored(h).last?.messageId == small.messageId, "the grown message stays")
        #expect(stored(h).count < 4, "older messages made room")
        #expect(h.domain.apps[h.app]?.groups["g1"]?.community.historyBytes["RCDefault"] == total)
    }

    @Test("MO-3: an app's channels together keep at most their bytes: the app's oldest message goes first, whichever group holds it")
    func appBound() throws {
        let (h, _, _, _, _) = setUp()
        h.domain.communityBytesPerApp = 100
        h.run(.createGroup(app: h.app, groupId: "g2", name: "Two", creator: "alice"))
        let first = try #require(sent(send(h, "RCDefault", String(repeating: "a", count: 40))).first)
        h.advance(seconds: 1)
        _ = send(h, "RCDefault", String(repeating: "b", count: 40), groups: ["g2"])
        h.advance(seconds: 1)
        let third = send(h, "vip", String(repeating: "c", count: 40))
        #expect(third.mutations.contains(.deleteCommunityMessage(app: h.app, groupId: "g1", channelId: "RCDefault", messageId: first.messageId)))
        #expect(stored(h).isEmpty && stored(h, channel: "vip").count == 1)
        #expect(h.domain.apps[h.app]?.groups["g2"]?.community.history["RCDefault"]?.count == 1)
        #expect(h.domain.apps[h.app]?.communityBytes == 80)
        // A dismissed group and a deleted channel give their bytes back.
        #expect(h.run(.dismissGroup(app: h.app, groupId: "g2")).succeeded)
        #expect(h.domain.apps[h.app]?.communityBytes == 40)
        #expect(h.run(.deleteChannel(app: h.app, groupId: "g1", channelId: "vip")).succeeded)
        #expect(h.domain.apps[h.app]?.communityBytes == 0)
    }

    // MARK: MO-5

    @Test("MO-5: a muted member's client send is refused with 23408 and reaches nobody; the app server still sends")
    func mutes() throws {
        let (h, a, b, c, d) = setUp()
        let mute = h.run(.community(app: h.app, groupId: "g1", .editList(.muted, channelId: "RCDefault", add: true, users: ["carol"]), .server))
        #expect(mute.reply.value == .userIds(["carol"]))
        #expect(rulesEvents(h, c).map(\.action) == ["muteAdd"])
        for s in [a, b, d] { #expect(rulesEvents(h, s).isEmpty, "only the muted user is told") }
        h.clearInboxes()

        let refused = send(h, actor: .session(c))
        #expect(refused.error?.code == .muted && refused.error?.code.rawValue == 23408)
        #expect(refused.effects.isEmpty && refused.mutations.isEmpty)
        for s in [a, b] { #expect(messages(h, s).isEmpty) }
        // Another channel is open to her; the app server's sends are not checked.
        h.run(.createChannel(app: h.app, groupId: "g1", channelId: "open", .public))
        #expect(send(h, "open", actor: .session(c)).succeeded)
        #expect(send(h, from: "carol").succeeded)
        // The whole group's list holds her everywhere.
        h.run(.community(app: h.app, groupId: "g1", .editList(.muted, channelId: "", add: true, users: ["carol"]), .server))
        #expect(send(h, "open", actor: .session(c)).error?.code == .muted)
        h.run(.community(app: h.app, groupId: "g1", .editList(.muted, channelId: "", add: false, users: ["carol"]), .server))
        h.run(.community(app: h.app, groupId: "g1", .editList(.muted, channelId: "RCDefault", add: false, users: ["carol"]), .server))
        h.clearInboxes()
        let ok = send(h, "RCDefault", "back", actor: .session(c))
        let m = try #require(sent(ok).first)
        #expect(m.fromUserId == "carol" && !m.fromServer)
        #expect(messages(h, a).map(\.messageId) == [m.messageId] && messages(h, b).map(\.messageId) == [m.messageId])
        #expect(messages(h, c).isEmpty, "a client's own send is its answer")
        // A client may not send where it cannot see, nor as a non-member.
        #expect(send(h, "vip", actor: .session(c)).error?.code == .notGroupMember)
        #expect(send(h, actor: .session(d)).error?.code == .notGroupMember)
        // Audited (MO-8).
        guard case .success(.audit(let entries, _)) = h.domain.query(.audit(app: h.app, roomId: "g1", before: nil, limit: 10), now: h.now) else {
            Issue.record("no audit")
            return
        }
        #expect(entries.map(\.action) == [.unmute, .unmute, .mute, .mute])
    }

    @Test("MO-5: a frozen channel takes only its allowed senders; everyone who sees it is told")
    func freeze() throws {
        let (h, a, b, c, d) = setUp()
        h.run(.community(app: h.app, groupId: "g1", .editList(.allowedSenders, channelId: "RCDefault", add: true, users: ["bob"]), .server))
        h.clearInboxes()
        let freeze = h.run(.community(app: h.app, groupId: "g1", .setFrozen(channelId: "RCDefault", true), .server))
        #expect(freeze.reply.value == .flag(true))
        for s in [a, b, c] { #expect(rulesEvents(h, s).map(\.action) == ["freeze"]) }
        #expect(rulesEvents(h, d).isEmpty)
        #expect(send(h, actor: .session(c)).error?.code == .muted)
        #expect(send(h, actor: .session(a)).error?.code == .muted)
        #expect(send(h, actor: .session(b)).succeeded)
        #expect(send(h, from: "carol").succeeded, "the app server is not held by a freeze")
        guard case .success(.communityRules(let rules)) = h.domain.query(.communityRules(app: h.app, groupId: "g1", channelId: "RCDefault"), now: h.now) else {
            Issue.record("no rules")
            return
        }
        #expect(rules == CommunityRules(muted: [], allowedSenders: ["bob"], frozen: true))
        // A group-wide freeze holds every channel; the group's allowed list lets through.
        h.run(.community(app: h.app, groupId: "g1", .setFrozen(channelId: "RCDefault", false), .server))
        h.run(.community(app: h.app, groupId: "g1", .setFrozen(channelId: "", true), .server))
        h.run(.createChannel(app: h.app, groupId: "g1", channelId: "open", .public))
        #expect(send(h, "open", actor: .session(c)).error?.code == .muted)
        h.run(.community(app: h.app, groupId: "g1", .editList(.allowedSenders, channelId: "", add: true, users: ["carol"]), .server))
        #expect(send(h, "open", actor: .session(c)).succeeded)
        // Bad input names the field and changes nothing.
        for bad: CommunityChange in [.editList(.muted, channelId: "nope", add: true, users: ["bob"]), .setFrozen(channelId: "nope", true)] {
            let out = h.run(.community(app: h.app, groupId: "g1", bad, .server))
            #expect(out.error?.field == "channelId" && out.mutations.isEmpty)
        }
        let tooMany = h.run(.community(app: h.app, groupId: "g1", .editList(.muted, channelId: "", add: true,
                                                                             users: (0...Limits.maxUsersPerCall).map { "u\($0)" }), .server))
        #expect(tooMany.error?.field == "userIds" && tooMany.mutations.isEmpty)
    }

    @Test("MO-5: a list holds at most its bound; leaving the group leaves its lists; a deleted channel takes its messages and controls")
    func boundsAndLifecycle() {
        let (h, _, _, _, _) = setUp()
        var added = 0
        while added < Limits.maxCommunityListUsers {
            let batch = (added..<min(Limits.maxCommunityListUsers, added + Limits.maxUsersPerCall)).map { "m\($0)" }
            #expect(h.run(.community(app: h.app, groupId: "g1", .editList(.muted, channelId: "", add: true, users: batch), .server)).succeeded)
            added += batch.count
        }
        let past = h.run(.community(app: h.app, groupId: "g1", .editList(.muted, channelId: "", add: true, users: ["carol"]), .server))
        #expect(past.error?.code == .limitExceeded && past.mutations.isEmpty)
        h.run(.community(app: h.app, groupId: "g1", .editList(.muted, channelId: "", add: false, users: ["m0"]), .server))
        #expect(h.run(.community(app: h.app, groupId: "g1", .editList(.muted, channelId: "", add: true, users: ["carol"]), .server)).succeeded)
        let quit = h.run(.quitGroup(app: h.app, groupId: "g1", ["carol"]))
        #expect(quit.mutations.contains { if case .putCommunityRules(_, "g1", "", let r) = $0 { return !r.muted.contains("carol") } else { return false } })

        h.run(.createChannel(app: h.app, groupId: "g1", channelId: "tmp", .public))
        _ = send(h, "tmp")
        h.run(.community(app: h.app, groupId: "g1", .setFrozen(channelId: "tmp", true), .server))
        let delete = h.run(.deleteChannel(app: h.app, groupId: "g1", channelId: "tmp"))
        #expect(delete.mutations.contains(.deleteCommunityChannel(app: h.app, groupId: "g1", channelId: "tmp")))
        h.run(.createChannel(app: h.app, groupId: "g1", channelId: "tmp", .public))
        #expect(stored(h, channel: "tmp").isEmpty)
        guard case .success(.communityRules(let rules)) = h.domain.query(.communityRules(app: h.app, groupId: "g1", channelId: "tmp"), now: h.now) else {
            Issue.record("no rules")
            return
        }
        #expect(rules.isEmpty)
    }

    // MARK: MO-6 and the history bound

    @Test("MO-6: history by time range, newest first or oldest first, what the viewer may see")
    func historyRanges() throws {
        let (h, _, _, _, _) = setUp()
        var ids: [String] = []
        for i in 0..<5 {
            ids.append(try #require(sent(send(h, "RCDefault", "m\(i)")).first).messageId)
            h.advance(seconds: 1)
        }
        let vip = try #require(sent(send(h, "vip", "secret")).first)
        let t0 = h.now - 5_000
        #expect(try history(h, channel: "RCDefault", oldest: t0, newest: h.now).get().map(\.messageId) == ids)
        #expect(try history(h, channel: "RCDefault", oldest: t0, newest: h.now, limit: 2, newestFirst: true).get().map(\.messageId)
                == [ids[4], ids[3]])
        #expect(try history(h, channel: "RCDefault", oldest: t0, newest: t0 + 2_000, includeNewest: false).get().map(\.messageId) == [ids[0], ids[1]])
        #expect(try history(h, channel: "RCDefault", oldest: t0, newest: t0 + 2_000, includeOldest: false).get().map(\.messageId) == [ids[1], ids[2]])
        // Every channel: carol does not see vip, bob does.
        #expect(try history(h, viewer: "carol").get().map(\.messageId) == ids)
        #expect(try history(h, viewer: "bob").get().map(\.messageId) == ids + [vip.messageId])
        #expect(history(h, channel: "vip", viewer: "carol").isFailure == false)
        #expect(try history(h, channel: "vip", viewer: "carol").get().isEmpty)
        #expect(history(h, viewer: "dave").error?.code == .notGroupMember)
        // Bad ranges and pages name the field.
        #expect(history(h, oldest: h.now, newest: h.now - 1).error?.field == "endAt")
        #expect(history(h, oldest: h.now - Limits.maxCommunityHistorySpanMilliseconds - 1).error?.field == "startAt")
        #expect(history(h, limit: 0).error?.field == "pageSize")
        #expect(history(h, limit: Limits.maxPageSize + 1).error?.field == "pageSize")
    }

    @Test("MO-3: a channel keeps its newest messages within its bound; the oldest leave the store too")
    func historyBound() throws {
        let (h, _, _, _, _) = setUp()
        var first: CommunityMessage?
        for i in 0..<Limits.maxCommunityHistoryPerChannel {
            let m = try #require(sent(send(h, "RCDefault", "m\(i)")).first)
            if first == nil { first = m }
        }
        let next = send(h, "RCDefault", "one more")
        #expect(next.mutations.contains(.deleteCommunityMessage(app: h.app, groupId: "g1", channelId: "RCDefault", messageId: first!.messageId)))
        let kept = stored(h)
        #expect(kept.count == Limits.maxCommunityHistoryPerChannel && kept.first?.content == "m1" && kept.last?.content == "one more")
        // Bytes: big messages push out more.
        var settings = AppSettings()
        settings.maxMessageBytes = 1_048_576
        h.run(.configureApp(app: h.app, settings))
        let big = String(repeating: "x", count: 1_000_000)
        for _ in 0..<5 { #expect(send(h, "vip", big).succeeded) }
        #expect(stored(h, channel: "vip").count == Limits.maxCommunityHistoryBytesPerChannel / 1_000_000)
    }
}

extension Result where Failure == ChatError {
    var isFailure: Bool { if case .failure = self { return true } else { return false } }
}

extension Result where Success == Reply, Failure == ChatError {
    var value: Reply? { if case .success(let r) = self { return r } else { return nil } }
}
