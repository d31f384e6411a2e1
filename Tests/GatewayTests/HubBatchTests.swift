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
    @Test func consecutiveEventsForOneAudienceGoOutAsOneBlock() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "batch"]).status == 201)
        let alice = try g.client("alice"), bob = try g.client("bob")
        _ = try alice.expectOK(try alice.command("room.join", ["roomId": "batch"]))
        let joined = try bob.expectOK(try bob.command("room.join", ["roomId": "batch"])).obj("joinInfo")
        let epoch = try #require(joined.obj("room").str("epoch"))
        // Past the room's own events (the joins' notices come after bob's position).
        let offset = Int64(try #require(joined.int("offset"))) + 100
        // A real message event, as the template of the batch's events (so every frame the test
        // transport records is a protocol frame: scripts/websocket-schema.sh checks them all).
        #expect(try g.rest().call("POST", "/v1/rooms/batch/messages", ["content": "template"]).status == 201)
        let template = try #require(bob.drain().first { $0.str("ev") == "room.message" })
        _ = alice.drain()
        let aliceBlocks = alice.blocksReceived, bobBlocks = bob.blocksReceived
        var frames: [Int64: [UInt8]] = [:]
        for n in Int64(1)...4 {
            var event = template
            var data = event.obj("data")
            var message = data.obj("message")
            message["content"] = "e\(n)"
            data["message"] = message
            event["data"] = data
            event["offset"] = offset + n
            frames[n] = Array(try JSONSerialization.data(withJSONObject: event))
        }
        let encoded = frames

        let room = RoomKey(app: g.appKey, roomId: "batch")
        let aliceBox = LoopBoundBox(alice)
        g.onLoop { () -> Bool in
            let aliceSession = aliceBox.value.session!.id
            func event(_ n: Int64, _ audience: Audience) -> Published {
                .deliver(frame: Frames.text(encoded[n]!), audience: audience, offset: offset + n, epoch: epoch)
            }
            g.core.hubs.hub(0)!.apply([
                event(1, .room(room)), event(2, .room(room)),
                event(3, .roomExceptSession(room, aliceSession)),
                event(4, .room(room)),
            ])
            return true
        }
        func contents(_ c: SessionClient) -> [String] {
            c.drain().compactMap { $0.obj("data").obj("message").str("content") }
        }
        #expect(contents(alice) == ["e1", "e2", "e4"], "alice is not sent the event that excludes her session")
        #expect(contents(bob) == ["e1", "e2", "e3", "e4"])
        // e1 and e2 in one block; e3 (another audience) and e4 each in their own.
        #expect(alice.blocksReceived - aliceBlocks == 2)
        #expect(bob.blocksReceived - bobBlocks == 3)
        let replay = g.onLoop { g.core.hubs.hub(0)!.resumableOffsets(room, after: offset) }
        #expect(replay == [offset + 1, offset + 2, offset + 3, offset + 4])
    }
}
