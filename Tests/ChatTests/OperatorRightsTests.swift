import Testing
@testable import Chat

/// MO-7: NIM's `operator` acting through the app server has the rights of its role in the room, as
/// NIM enforces them: only the creator sets managers and opens or closes the room; the creator and
/// managers set common members, the blocklist and mutes, on members below them; a common member,
/// a guest or an unknown account may do none of it (40301, NIM 403), and nothing changes.
@Suite struct OperatorRightsTests {
    /// Room r created by "host", with manager "mgr", common member "com" and guest "gst" present.
    func room() -> Harness {
        let h = Harness()
        h.createRoom("r") { $0.creator = "host" }
        for u in ["mgr", "com", "gst"] { #expect(h.join(h.connect(u), "r").succeeded) }
        #expect(h.run(.setRole(app: h.app, roomId: "r", target: "mgr", .setManager(true), .server, notifyExt: "")).succeeded)
        #expect(h.run(.setRole(app: h.app, roomId: "r", target: "com", .setCommon(true), .server, notifyExt: "")).succeeded)
        h.clearInboxes()
        return h
    }

    func denied(_ out: Outcome, _ what: String) {
        #expect(out.error?.code == .permissionDenied && out.error?.code.nimCode == 403, "\(what): \(String(describing: out.error))")
        #expect(out.effects.isEmpty && out.mutations.isEmpty, "\(what) changed something")
    }

    @Test("MO-7: only the creator sets managers and opens or closes the room")
    func creatorOnly() {
        let h = room()
        for op in ["mgr", "com", "gst", "stranger"] {
            denied(h.run(.setRole(app: h.app, roomId: "r", target: "gst", .setManager(true), .account(op), notifyExt: "")), "\(op) sets a manager")
            denied(h.run(.setRoomOpen(app: h.app, roomId: "r", false, .account(op), nim: nil)), "\(op) closes the room")
        }
        let promoted = h.run(.setRole(app: h.app, roomId: "r", target: "gst", .setManager(true), .account("host"), notifyExt: "n"))
        #expect(promoted.succeeded)
        #expect(h.memberType("r", "gst") == .manager)
        // The notification names the operator as its source (NIM's fromAccount).
        let note = promoted.deliveries.compactMap { if case .notification(let n) = $0.event { return n } else { return nil } }.first
        #expect(note?.source?.userId == "host")
        #expect(h.run(.setRoomOpen(app: h.app, roomId: "r", false, .account("host"), nim: nil)).succeeded)
    }

    @Test("MO-7: managers set common members, the blocklist and mutes on members below them; common members and guests may not")
    func managers() {
        let h = room()
        #expect(h.run(.setRole(app: h.app, roomId: "r", target: "gst", .setCommon(true), .account("mgr"), notifyExt: "")).succeeded)
        #expect(h.run(.mute(app: h.app, roomId: "r", ["gst"], .permanent, .account("mgr"), rc: nil, nim: NIMNotify())).succeeded)
        #expect(h.run(.block(app: h.app, roomId: "r", ["com"], minutes: nil, .account("mgr"), rc: nil, nim: nil)).succeeded)
        // Not on the creator, another manager or itself.
        denied(h.run(.block(app: h.app, roomId: "r", ["host"], minutes: nil, .account("mgr"), rc: nil, nim: nil)), "manager blocks the creator")
        #expect(h.run(.setRole(app: h.app, roomId: "r", target: "gst", .setManager(true), .account("host"), notifyExt: "")).succeeded)
        denied(h.run(.mute(app: h.app, roomId: "r", ["gst"], .permanent, .account("mgr"), rc: nil, nim: nil)), "manager mutes a manager")
        denied(h.run(.mute(app: h.app, roomId: "r", ["mgr"], .permanent, .account("mgr"), rc: nil, nim: nil)), "manager mutes itself")
        for op in ["gst2", "stranger"] {
            denied(h.run(.setRole(app: h.app, roomId: "r", target: "mgr", .setCommon(true), .account(op), notifyExt: "")), "\(op) sets common")
        }
        // A bad operator id is a parameter error naming operator.
        let bad = h.run(.setRoomOpen(app: h.app, roomId: "r", false, .account(""), nim: nil))
        #expect(bad.error?.code == .invalidParameter && bad.error?.field == "operator")
    }
}
