import Testing
@testable import Chat

/// AU-3 in the domain: one message to several rooms (all or none) and a broadcast to every room
/// with members present, each one command with one answer.
@Suite struct MultiRoomTests {
    static let server = MessageSender.server(userId: "ops", nickname: "Ops", avatar: "")

    /// Rooms a, b, c with one member each (ua, ub, uc); room "empty" has no one.
    func rooms(_ configure: (inout AppSettings) -> Void = { _ in }) -> (Harness, a: SessionID, b: SessionID, c: SessionID) {
        let h = Harness(configure)
        for r in ["a", "b", "c", "empty"] { #expect(h.createRoom(r).succeeded) }
        let a = h.connect("ua"), b = h.connect("ub"), c = h.connect("uc")
        #expect(h.join(a, "a").succeeded)
        #expect(h.join(b, "b").succeeded)
        #expect(h.join(c, "c").succeeded)
        h.clearInboxes()
        return (h, a, b, c)
    }

    func history(_ h: Harness, _ room: String) -> [String] {
        guard case .messages(let list)? = h.query(.history(app: h.app, roomId: room, start: 0, limit: 100, .ascending, kinds: [])) else { return ["?"] }
        return list.map(\.content)
    }

    @Test("AU-3: a list send gives each named room its own message, kept in its history; other rooms get nothing")
    func listSendReachesTheNamedRoomsOnly() {
        let (h, a, b, c) = rooms()
        let out = h.run(.sendToRooms(app: h.app, roomIds: ["a", "b", "a"], Self.server, .text, content: "hi"))
        guard case .success(.messages(let sent)) = out.reply else {
            Issue.record("no messages: \(out.reply)")
            return
        }
        // A repeated room is sent to once; each room's message has its own id.
        #expect(sent.map(\.roomId) == ["a", "b"])
        #expect(Set(sent.map(\.id)).count == 2)
        #expect(h.received(a).messages.map(\.content) == ["hi"])
        #expect(h.received(b).messages.map(\.content) == ["hi"])
        #expect(h.received(c).messages.isEmpty, "room c was not named")
        #expect(history(h, "a") == ["hi"] && history(h, "b") == ["hi"] && history(h, "c").isEmpty)
        #expect(out.webhooks.filter { $0.type == .messageSent }.map(\.roomId) == ["a", "b"])
    }

    @Test("AU-3: a missing room, a full room or bad content refuses the whole list send, naming the field, and nothing changes")
    func listSendIsAllOrNothing() {
        let (h, a, b, _) = rooms { $0.roomMessagesPerSecond = 5 }  // a budget of one message at a time
        let missing = h.run(.sendToRooms(app: h.app, roomIds: ["a", "nope", "b"], Self.server, .text, content: "x"))
        #expect(missing.error?.code == .roomNotFound && missing.error?.field == "roomIds")
        #expect(missing.effects.isEmpty && missing.mutations.isEmpty && missing.webhooks.isEmpty)
        #expect(h.received(a).isEmpty && h.received(b).isEmpty)

        // Room b's budget is spent: the call that names a and b sends to neither, and a's budget
        // is untouched (a single send to a still goes through).
        #expect(h.run(.sendMessage(app: h.app, roomId: "b", Self.server, .text, content: "fills b")).succeeded)
        h.clearInboxes()
        let busy = h.run(.sendToRooms(app: h.app, roomIds: ["a", "b"], Self.server, .text, content: "y"))
        #expect(busy.error?.code == .roomBusy && busy.error?.field == "roomIds")
        #expect(busy.effects.isEmpty && busy.mutations.isEmpty)
        #expect(h.received(a).isEmpty && h.received(b).isEmpty)
        #expect(history(h, "a").isEmpty)
        #expect(h.run(.sendMessage(app: h.app, roomId: "a", Self.server, .text, content: "a alone")).succeeded)

        #expect(h.run(.sendToRooms(app: h.app, roomIds: [], Self.server, .text, content: "z")).error?.field == "roomIds")
        let eleven = (0...Limits.maxRoomsPerSend).map { "r\($0)" }
        #expect(h.run(.sendToRooms(app: h.app, roomIds: eleven, Self.server, .text, content: "z")).error?.field == "roomIds")
        #expect(h.run(.sendToRooms(app: h.app, roomIds: ["a", "bad id!"], Self.server, .text, content: "z")).error?.field == "roomIds")
        #expect(h.run(.sendToRooms(app: h.app, roomIds: ["a"], Self.server, .text, content: "")).error?.field == "content")
        #expect(h.run(.sendToRooms(app: h.app, roomIds: ["a"], .session(a), .text, content: "z")).error?.field == "sender")
    }

    @Test("AU-3: a broadcast reaches every member present in every room, with one id, and is kept nowhere")
    func broadcastReachesEveryRoomAndIsNotStored() {
        let (h, a, b, c) = rooms()
        let outsider = h.connect("nobody")  // connected, in no room
        let before = h.domain.apps[h.app]!.rooms["a"]!.lastActivity
        h.advance(seconds: 5)
        let out = h.run(.broadcast(app: h.app, Self.server, .text, content: "to all"))
        guard case .success(.broadcast(let id, let reached)) = out.reply else {
            Issue.record("no broadcast answer: \(out.reply)")
            return
        }
        #expect(reached == 3, "rooms a, b and c have members; the empty room is skipped")
        for s in [a, b, c] {
            let got = h.received(s).messages
            #expect(got.map(\.content) == ["to all"])
            #expect(got.first?.id == id && got.first?.transient == true && got.first?.priority == .high)
        }
        #expect(h.received(outsider).isEmpty, "a user in no room is not a room's member")
        #expect(history(h, "a").isEmpty && history(h, "b").isEmpty, "not kept in history (RongCloud's broadcast)")
        #expect(out.mutations.isEmpty && out.webhooks.isEmpty, "nothing stored; webhooks only with transientWebhooks")
        #expect(h.domain.apps[h.app]!.rooms["a"]!.lastActivity == before, "a broadcast does not keep a room alive")
    }

    @Test("AU-3: an app broadcasts at most once a second (42901), and a refused broadcast sends nothing")
    func broadcastsAreRateLimited() {
        let (h, a, _, _) = rooms()
        #expect(h.run(.broadcast(app: h.app, Self.server, .text, content: "one")).succeeded)
        h.clearInboxes()
        let second = h.run(.broadcast(app: h.app, Self.server, .text, content: "two"))
        #expect(second.error?.code == .rateLimited)
        #expect(second.effects.isEmpty && h.received(a).isEmpty)
        h.advance(seconds: 1)
        #expect(h.run(.broadcast(app: h.app, Self.server, .text, content: "three")).succeeded)
        #expect(h.received(a).messages.map(\.content) == ["three"])
        // Bad input is refused before the bucket is touched, naming its field.
        h.advance(seconds: 1)
        #expect(h.run(.broadcast(app: h.app, Self.server, .text, content: "")).error?.field == "content")
        #expect(h.run(.broadcast(app: h.app, Self.server, .text, content: "x", options: MessageOptions(targets: ["ua"]))).error?.field == "targets")
        #expect(h.run(.broadcast(app: h.app, .session(a), .text, content: "x")).error?.field == "sender")
        #expect(h.run(.broadcast(app: h.app, Self.server, .text, content: "four")).succeeded)
    }

    @Test("AU-3: the broadcast bucket survives a snapshot, so every node decides alike")
    func broadcastBucketIsInTheImage() throws {
        let (h, _, _, _) = rooms()
        #expect(h.run(.broadcast(app: h.app, Self.server, .text, content: "one")).succeeded)
        let copy = try ChatDomain(image: h.domain.image(), makeID: { "id" })
        #expect(copy.apply(.broadcast(app: h.app, Self.server, .text, content: "two"), now: h.now).reply.error?.code == .rateLimited)
    }
}
