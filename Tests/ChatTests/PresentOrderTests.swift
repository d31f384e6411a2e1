import Testing
import TestKit
@testable import Chat

/// A room's present users in join order (NIM-3 member lists, RC-2 queries by join time), kept as a
/// slot list whose slots live in the member records (issue 32: no dictionary of its own).
@Suite struct PresentOrderTests {
    @Test func aSlotListBehavesAsAnArray() {
        var rng = SplitMix64(seed: 11)
        var list = SlotList<Int>()
        var model: [(key: Int, slot: Int32)] = []
        for step in 0..<3_000 {
            if model.isEmpty || rng.next() % 3 != 0 {
                let slot = list.append(step)
                #expect(!model.contains { $0.slot == slot }, "a slot in use is never given again")
                model.append((step, slot))
            } else {
                let i = Int(rng.next() % UInt64(model.count))
                list.remove(slot: model.remove(at: i).slot)
            }
            #expect(list.count == model.count && list.isEmpty == model.isEmpty)
            #expect(list.all == model.map(\.key))
            #expect(list.first == model.first?.key && list.last == model.last?.key)
            if let anchor = model.indices.randomElement(using: &rng) {
                let after = model[(anchor + 1)...].map(\.key)
                #expect(list.forward(afterSlot: model[anchor].slot, limit: 5) == Array(after.prefix(5)))
                #expect(list.backward(beforeSlot: model[anchor].slot, limit: 5) == Array(model[..<anchor].map(\.key).reversed().prefix(5)))
                #expect(list.forward(afterSlot: nil, limit: 3, where: { $0 % 2 == 0 }) == Array(model.map(\.key).filter { $0 % 2 == 0 }.prefix(3)))
            }
        }
    }

    /// Users joining and leaving on two devices each, in random order: the domain's member list
    /// (ascending, descending, paged from an anchor) is the order in which each became present.
    @Test func theMemberListIsTheOrderInWhichUsersBecamePresent() throws {
        let h = Harness()
        h.createRoom("r") { $0.multiDevice = .multiple }
        let users = (0..<12).map { "u\($0)" }
        var sessions: [String: [SessionID]] = [:]
        for u in users { sessions[u] = [h.connect(u, device: "phone"), h.connect(u, device: "tablet")] }
        var inRoom: Set<SessionID> = []
        var model: [String] = []
        var rng = SplitMix64(seed: 32)
        for _ in 0..<400 {
            let u = users[Int(rng.next() % UInt64(users.count))]
            let s = sessions[u]![Int(rng.next() % 2)]
            if inRoom.contains(s) {
                h.leave(s, "r")
                inRoom.remove(s)
                if !sessions[u]!.contains(where: inRoom.contains) { model.removeAll { $0 == u } }
            } else {
                h.join(s, "r")
                inRoom.insert(s)
                if !model.contains(u) { model.append(u) }
            }
            #expect(h.present("r") == model)
            guard let anchor = model.indices.randomElement(using: &rng) else { continue }
            let page = h.query(.members(app: h.app, roomId: "r", .present, .ascending, limit: 3, after: model[anchor]))
            guard case .members(let list, let total)? = page else { Issue.record("no member page"); return }
            #expect(list.map(\.userId) == Array(model[(anchor + 1)...].prefix(3)) && total == model.count)
            let back = h.query(.members(app: h.app, roomId: "r", .present, .descending, limit: 3, after: model[anchor]))
            guard case .members(let older, _)? = back else { Issue.record("no member page"); return }
            #expect(older.map(\.userId) == Array(model[..<anchor].reversed().prefix(3)))
        }
        // A user who is not present anchors nothing.
        let gone = users.first { !model.contains($0) }
        if let gone {
            let page = h.query(.members(app: h.app, roomId: "r", .present, .ascending, limit: 3, after: gone))
            guard case .members(let list, _)? = page else { Issue.record("no member page"); return }
            #expect(list.isEmpty)
        }
    }
}
