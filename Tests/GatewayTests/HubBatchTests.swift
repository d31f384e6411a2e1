import Chat
import Engine
import Foundation
@testable import Gateway
import Reactor
import Testing
import TestKit
import Wire

/// Issue 15: consecutive events of one engine batch for the same audience reach each recipient as
/// one block (one queue entry, one reference), with every event intact and in order; a different
/// audience in between splits the run, and the resume window still holds every event (BX-1).
@Suite("Hub: a batch's events merged per audience")
struct HubBatchTests {
    /// A room with alice and bob, and a real message event of it as the template of the batch's
    /// events (so every frame the test transport records is a protocol frame:
    /// scripts/websocket-schema.sh checks them all).
    struct Room {
        let g: InProcessGateway
        let alice: SessionClient
        let bob: SessionClient
        let key: RoomKey
        let epoch: String
        /// Past the room's own events (the joins' notices come after bob's position).
        let offset: Int64
        let template: [String: Any]

        init() throws {
            g = try InProcessGateway()
            #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "batch"]).status == 201)
            alice = try g.client("alice")
            bob = try g.client("bob")
            _ = try alice.expectOK(try alice.command("room.join", ["roomId": "batch"]))
            let joined = try bob.expectOK(try bob.command("room.join", ["roomId": "batch"])).obj("joinInfo")
            key = RoomKey(app: g.appKey, roomId: "batch")
            epoch = try #require(joined.obj("room").str("epoch"))
            offset = Int64(try #require(joined.int("offset"))) + 100
            #expect(try g.rest().call("POST", "/v1/rooms/batch/messages", ["content": "template"]).status == 201)
            template = try #require(bob.drain().first { $0.str("ev") == "room.message" })
            _ = alice.drain()
        }

        /// Event `n` after `offset`, carrying `content`, for `audience`.
        func event(_ n: Int64, _ content: String, _ audience: Audience) throws -> Published {
            var event = template
            var data = event.obj("data")
            var message = data.obj("message")
            message["content"] = content
            data["message"] = message
            event["data"] = data
            event["offset"] = offset + n
            let json = Array(try JSONSerialization.data(withJSONObject: event))
            return .deliver(frame: Frames.text(json), audience: audience, offset: offset + n, epoch: epoch, lane: .normal)
        }

        /// Hands the batch to the hub of the sessions' loop, as the engine would.
        func apply(_ items: [Published]) {
            let g = self.g
            g.onLoop { () -> Bool in
                g.core.hubs.hub(0)!.apply(items)
                return true
            }
        }

        static func contents(_ c: SessionClient) -> [String] {
            c.drain().compactMap { $0.obj("data").obj("message").str("content") }
        }
    }

    @Test func consecutiveEventsForOneAudienceGoOutAsOneBlock() throws {
        let r = try Room()
        defer { r.g.stop() }
        let aliceBlocks = r.alice.blocksReceived, bobBlocks = r.bob.blocksReceived
        let aliceBox = LoopBoundBox(r.alice)
        let g = r.g
        let aliceSession = g.onLoop { aliceBox.value.session!.id }
        r.apply([
            try r.event(1, "e1", .room(r.key)), try r.event(2, "e2", .room(r.key)),
            try r.event(3, "e3", .roomExceptSession(r.key, aliceSession)),
            try r.event(4, "e4", .room(r.key)),
        ])
        #expect(Room.contents(r.alice) == ["e1", "e2", "e4"], "alice is not sent the event that excludes her session")
        #expect(Room.contents(r.bob) == ["e1", "e2", "e3", "e4"])
        // e1 and e2 in one block; e3 (another audience) and e4 each in their own.
        #expect(r.alice.blocksReceived - aliceBlocks == 2)
        #expect(r.bob.blocksReceived - bobBlocks == 3)
        let room = r.key, offset = r.offset
        let replay = g.onLoop { g.core.hubs.hub(0)!.resumableOffsets(room, after: offset) }
        #expect(replay == [offset + 1, offset + 2, offset + 3, offset + 4])
    }

    // The merged block is bounded (Hub.maxMergedBytes): a run past it is cut into several blocks.
    @Test func aMergedBlockStaysWithinItsBound() throws {
        let r = try Room()
        defer { r.g.stop() }
        let bobBlocks = r.bob.blocksReceived
        // Five events of about 15 KB each: four fit in one block, the fifth starts the next.
        let contents = (1...5).map { n in "m\(n)" + String(repeating: "x", count: 15_000) }
        let items = try (1...5).map { try r.event(Int64($0), contents[$0 - 1], .room(r.key)) }
        let size = items.map { item -> Int in
            guard case .deliver(let frame, _, _, _, _) = item else { return 0 }
            return frame.count
        }
        try #require(size[0..<4].reduce(0, +) <= Hub.maxMergedBytes && size.reduce(0, +) > Hub.maxMergedBytes)
        r.apply(items)
        #expect(Room.contents(r.bob) == contents)
        #expect(r.bob.blocksReceived - bobBlocks == 2)
    }
}
