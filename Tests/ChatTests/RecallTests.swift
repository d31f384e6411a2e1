import Testing
@testable import Chat

/// MO-1 in the domain: who may recall a message (as RongCloud, NIM and ZIM document it), who is
/// told and who is not, what history shows afterwards, and bad input refused with its field named
/// and nothing changed.
@Suite struct RecallTests {
    /// A room with the sender, a bystander, a manager and an outsider in another room.
    func room(_ configure: (inout AppSettings) -> Void = { _ in })
        -> (Harness, sender: SessionID, other: SessionID, manager: SessionID, outsider: SessionID) {
        let h = Harness(configure)
        h.createRoom("r")
        h.createRoom("elsewhere")
        let sender = h.connect("sender"), other = h.connect("other"), manager = h.connect("boss"), outsider = h.connect("outsider")
        #expect(h.join(sender, "r").succeeded)
        #expect(h.join(other, "r").succeeded)
        #expect(h.join(manager, "r").succeeded)
        #expect(h.join(outsider, "elsewhere").succeeded)
        #expect(h.run(.setRole(app: h.app, roomId: "r", target: "boss", .setManager(true), .server, notifyExt: "")).succeeded)
        h.clearInboxes()
        return (h, sender, other, manager, outsider)
    }

    func send(_ h: Harness, _ s: SessionID, _ content: String, _ options: MessageOptions = MessageOptions()) -> ChatMessage {
        let out = h.run(.sendMessage(app: h.app, roomId: "r", .session(s), .text, content: content, options: options))
        guard case .success(.message(let m)) = out.reply else {
            Issue.record("send failed: \(String(describing: out.error))")
            return ChatMessage(id: "", roomId: "", sender: "", senderNickname: "", senderAvatar: "", senderExt: "", kind: .text, content: "", time: 0, fromServer: false)
        }
        return m
    }

    func recall(_ h: Harness, _ id: String, _ options: RecallOptions = RecallOptions(), by actor: Actor = .server) -> Outcome {
        h.run(.recallMessage(app: h.app, roomId: "r", messageId: id, options, actor))
    }

    func history(_ h: Harness) -> [ChatMessage] {
        guard case .messages(let list)? = h.query(.history(app: h.app, roomId: "r", start: 0, limit: 100, .ascending, kinds: [])) else { return [] }
        return list
    }

    func recalls(_ events: [ChatEvent]) -> [RecallEvent] {
        events.compactMap { if case .messageRecalled(let e) = $0 { return e } else { return nil } }
    }

    @Test("MO-1: the app server recalls a message: the room is told, the outsider is not, history keeps a tombstone, webhooks are told")
    func serverRecall() {
        let (h, sender, other, manager, outsider) = room()
        let m = send(h, sender, "oops")
        h.clearInboxes()
        let out = recall(h, m.id, RecallOptions(sender: "sender", sentTime: m.time, notifyExt: "spam"))
        #expect(out.succeeded)
        for s in [sender, other, manager] {
            let got = recalls(h.received(s))
            #expect(got.map(\.messageId) == [m.id])
            #expect(got.first?.operatorId == "" && got.first?.notifyExt == "spam" && got.first?.sender == "sender")
        }
        #expect(h.received(outsider).isEmpty, "a member of another room must not be told")
        let kept = history(h)
        #expect(kept.map(\.id) == [m.id])
        #expect(kept.first?.recalled == true && kept.first?.content == "" && kept.first?.time == m.time && kept.first?.sender == "sender")
        // MO-8: with the audit trail's entry.
        #expect(out.mutations.filter { if case .appendAudit = $0 { false } else { true } } == [.recallMessage(h.key("r"), messageId: m.id)])
        #expect(out.webhooks.map(\.type) == [.messageRecalled])
        #expect(out.webhooks.first?.details["messageId"] == m.id && out.webhooks.first?.userIds == ["sender"])
    }

    @Test("MO-1: a sender recalls its own message within the app's window, not after it (40301)")
    func senderWindow() {
        let (h, sender, other, _, _) = room { $0.recallWindowSeconds = 60 }
        let early = send(h, sender, "first")
        h.advance(seconds: 60)
        #expect(recall(h, early.id, by: .session(sender)).succeeded, "60 s is still inside a 60 s window")
        #expect(recalls(h.received(other)).first?.operatorId == "sender")
        let late = send(h, sender, "second")
        h.advance(seconds: 61)
        h.clearInboxes()
        let refused = recall(h, late.id, by: .session(sender))
        #expect(refused.error?.code == .permissionDenied && refused.error?.field == "messageId")
        #expect(refused.effects.isEmpty && refused.mutations.isEmpty && refused.webhooks.isEmpty)
        #expect(h.received(other).isEmpty)
        #expect(history(h).last?.content == "second")
    }

    @Test("MO-1: with recallWindowSeconds 0 a sender cannot recall its own message; a manager still can")
    func windowZero() {
        let (h, sender, _, manager, _) = room { $0.recallWindowSeconds = 0 }
        let m = send(h, sender, "x")
        h.advance(seconds: 1)
        #expect(recall(h, m.id, by: .session(sender)).error?.code == .permissionDenied)
        #expect(recall(h, m.id, by: .session(manager)).succeeded)
    }

    @Test("MO-1: a common member cannot recall another's message (40301); managers and the creator can, at any time")
    func whoMayRecallOthers() {
        let (h, sender, other, manager, _) = room()
        let m = send(h, sender, "x")
        let refused = recall(h, m.id, by: .session(other))
        #expect(refused.error?.code == .permissionDenied)
        #expect(!history(h).contains { $0.recalled })
        h.advance(seconds: 3600)
        #expect(recall(h, m.id, by: .session(manager)).succeeded, "a manager is not bound by the window")
        let creator = h.connect("founder")
        h.createRoom("owned") { $0.creator = "founder" }
        #expect(h.join(creator, "owned").succeeded)
        #expect(h.join(other, "owned").succeeded)
        let n = h.run(.sendMessage(app: h.app, roomId: "owned", .session(other), .text, content: "y"))
        guard case .success(.message(let sent)) = n.reply else { Issue.record("send failed"); return }
        h.advance(seconds: 3600)
        #expect(h.run(.recallMessage(app: h.app, roomId: "owned", messageId: sent.id, RecallOptions(), .session(creator))).succeeded)
    }

    @Test("MO-1: a member outside the room cannot recall (23406); an anonymous member cannot (40302)")
    func outsidersAndAnonymous() {
        let (h, sender, _, _, outsider) = room()
        let m = send(h, sender, "x")
        #expect(recall(h, m.id, by: .session(outsider)).error?.code == .notInRoom)
        let (anon, _) = h.connectAnonymous()
        #expect(h.join(anon, "r").succeeded)
        #expect(recall(h, m.id, by: .session(anon)).error?.code == .anonymousReadOnly)
    }

    @Test("MO-1: NIM's operator must be the sender, the creator or a manager (40301 naming operator)")
    func nimOperator() {
        let (h, sender, _, _, _) = room()
        let m = send(h, sender, "x")
        let refused = recall(h, m.id, RecallOptions(sender: "sender", sentTime: m.time, operatorId: "other"))
        #expect(refused.error?.code == .permissionDenied && refused.error?.field == "operator")
        #expect(refused.mutations.isEmpty)
        #expect(recall(h, m.id, RecallOptions(sender: "sender", sentTime: m.time, operatorId: "boss")).succeeded)
        let n = send(h, sender, "y")
        #expect(recall(h, n.id, RecallOptions(operatorId: "sender")).succeeded)
    }

    @Test("MO-1: a recall that does not describe the message, or of one already recalled or unknown, is 40401 naming the field")
    func mismatches() {
        let (h, sender, other, _, _) = room()
        let m = send(h, sender, "x")
        h.clearInboxes()
        let wrongSender = recall(h, m.id, RecallOptions(sender: "other"))
        #expect(wrongSender.error?.code == .notFound && wrongSender.error?.field == "sender")
        let wrongTime = recall(h, m.id, RecallOptions(sentTime: m.time + 1))
        #expect(wrongTime.error?.code == .notFound && wrongTime.error?.field == "sentTime")
        let unknown = recall(h, "nope")
        #expect(unknown.error?.code == .notFound && unknown.error?.field == "messageId")
        #expect(h.received(other).isEmpty)
        #expect(history(h).first?.content == "x")
        #expect(recall(h, m.id).succeeded)
        let again = recall(h, m.id)
        #expect(again.error?.code == .notFound && again.error?.field == "messageId")
        #expect(again.effects.isEmpty)
    }

    @Test("MO-1: bad input is refused with its field named, and nothing changes")
    func badInput() {
        let (h, sender, _, _, _) = room()
        let m = send(h, sender, "x")
        let cases: [(RecallOptions, String, String)] = [
            (RecallOptions(notifyExt: String(repeating: "e", count: Limits.maxRecallExtBytes + 1)), m.id, "notifyExt"),
            (RecallOptions(sender: ""), m.id, "sender"),
            (RecallOptions(operatorId: String(repeating: "o", count: Limits.maxUserIdBytes + 1)), m.id, "operator"),
            (RecallOptions(sentTime: -1), m.id, "sentTime"),
            (RecallOptions(), "", "messageId"),
            (RecallOptions(), String(repeating: "i", count: Limits.maxMessageIdBytes + 1), "messageId"),
        ]
        for (options, id, field) in cases {
            let out = recall(h, id, options)
            #expect(out.error?.code == .invalidParameter && out.error?.field == field, "\(field)")
            #expect(out.effects.isEmpty && out.mutations.isEmpty)
        }
        #expect(recall(h, m.id, RecallOptions(notifyExt: String(repeating: "e", count: Limits.maxRecallExtBytes))).succeeded)
        #expect(h.run(.recallMessage(app: h.app, roomId: "missing", messageId: m.id, RecallOptions(), .server)).error?.code == .roomNotFound)
    }

    @Test("MO-1: a message to listed members is recalled to them and its sender only")
    func addressedRecall() {
        let (h, sender, other, manager, _) = room()
        let m = send(h, sender, "for other", MessageOptions(targets: ["other"]))
        h.clearInboxes()
        #expect(recall(h, m.id).succeeded)
        #expect(recalls(h.received(other)).map(\.messageId) == [m.id])
        #expect(recalls(h.received(sender)).map(\.messageId) == [m.id])
        #expect(h.received(manager).isEmpty, "a member the message did not reach must not learn of its recall")
    }

    @Test("MO-1: the app's recall window is a setting with documented bounds")
    func windowSetting() {
        let h = Harness()
        var bad = AppSettingsPatch()
        bad.recallWindowSeconds = SettingsLimits.recallWindowSeconds.upperBound + 1
        let refused = h.run(.updateAppSettings(app: h.app, bad))
        #expect(refused.error?.code == .invalidParameter && refused.error?.field == "recallWindowSeconds")
        var ok = AppSettingsPatch()
        ok.recallWindowSeconds = 0
        #expect(h.run(.updateAppSettings(app: h.app, ok)).succeeded)
        #expect(h.domain.appSettings(h.app)?.recallWindowSeconds == 0)
        #expect(AppSettings().recallWindowSeconds == 120)
    }
}
