import Cluster
import Foundation
import Testing
import TestKit
#if canImport(Glibc)
import Glibc
#endif

/// Issue 12, CLUSTER.md "Snapshots and trimming": the leader publishes the cluster's state at a
/// log position and trims the log below it; a node that starts later starts from the snapshot,
/// not the log's first entry, and is in the same state as the others — sessions connected before
/// the snapshot, mutes with their deadlines, history beyond the in-memory window, room offsets.
/// In the same serialized suite as the other three-node tests.
extension ClusterGatewayTests {
    static func snapshotPosition(_ c: TestCluster, _ i: Int) throws -> Int {
        ((try c.readyz(i).json["cluster"] as? [String: Any])?["snapshot"] as? NSNumber)?.intValue ?? 0
    }

    static func history(_ c: TestCluster, node: Int, room: String = "r") throws -> [String] {
        let r = try c[node].rest().call("GET", "/v1/rooms/\(room)/messages?limit=100&order=asc")
        return ((r.json["messages"] as? [[String: Any]]) ?? []).map { "\($0.str("messageId") ?? "-") \($0.str("content") ?? "-")" }
    }

    @Test func aNodeStartsFromASnapshotAndTheLogIsTrimmed() async throws {
        try await offPool { () throws in
            let c = try TestCluster(nodeTimeout: 6, database: "snapshots", extra: ["--snapshot-every", "40", "--snapshot-interval", "1"])
            #expect(try c[0].rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            // Sessions that cross the snapshot: alice on node 1, bob on node 2.
            let alice = try c[1].client("alice"), bob = try c[2].client("bob")
            for client in [alice, bob] { _ = try client.expectOK(try client.command("room.join", ["roomId": "r"])) }
            // State with deadlines and order: a temporary mute, attributes, a queue element.
            #expect(try c[0].rest().call("POST", "/v1/rooms/r/mutes", ["userIds": ["dave"], "minutes": 5]).status == 200)
            #expect(try c[0].rest().call("PUT", "/v1/rooms/r/attributes", ["entries": ["topic": "snap", "seat": "1"]]).status == 200)
            // More messages than a room keeps in memory (50): history comes from the replica too.
            for i in 0..<70 {
                #expect(try c[i % 3].rest().call("POST", "/v1/rooms/r/messages", ["content": "m\(i)", "fromUserId": "admin"]).status == 201)
            }

            // The leader publishes a snapshot and trims the log below it.
            let db = try PGConnection(c.url)
            let deadline = Date().addingTimeInterval(30)
            var first: Int64 = 0, snapshot: Int64 = 0
            while Date() < deadline {
                first = Int64(try db.query("SELECT coalesce(min(position), 0) FROM roomcast_log").scalar ?? "0") ?? 0
                snapshot = Int64(try db.query("SELECT coalesce(max(position), 0) FROM roomcast_snapshots").scalar ?? "0") ?? 0
                if first > 1 && snapshot > 40 { break }
                // Entries keep coming now and then (a live cluster), so that trimming has room.
                usleep(200_000)
            }
            #expect(snapshot > 40, "no snapshot was published")
            #expect(first > 1, "the log was not trimmed (first position \(first))")
            #expect(first <= snapshot, "the log was trimmed past its newest snapshot")
            #expect(Int(try db.query("SELECT count(*) FROM roomcast_snapshots").scalar ?? "9") ?? 9 <= 2)
            #expect(try (0..<3).map { try Self.snapshotPosition(c, $0) }.contains { $0 > 0 })

            // A node that starts now starts from the snapshot (the log no longer has its start).
            try c.settle()
            c.nodes.append(try TestCluster.start(3, url: c.url, timeout: c.timeout, extra: c.extra))
            try c.waitReady(3)
            try c.settle()
            #expect(try Self.snapshotPosition(c, 3) >= Int(snapshot))
            // The same state as a node that applied the whole log.
            let expected = try Self.history(c, node: 0)
            #expect(expected.count == 70)
            #expect(try Self.history(c, node: 3) == expected)
            #expect(try Self.members(c, node: 3) == ["alice", "bob"])
            #expect(try Self.members(c, node: 3) == Self.members(c, node: 0))
            for path in ["/v1/rooms/r/mutes", "/v1/rooms/r/attributes", "/v1/rooms/r"] {
                #expect(try c[3].rest().call("GET", path).text == c[0].rest().call("GET", path).text, "\(path)")
            }

            // It serves the chat: a client on it receives alice's message at the same offset as bob.
            let carol = try c[3].client("carol")
            _ = try carol.expectOK(try carol.command("room.join", ["roomId": "r"]))
            _ = try alice.expectOK(try alice.command("room.send", ["roomId": "r", "content": "after"]))
            let atB = try bob.waitFor("room.message") { $0.obj("data").obj("message").str("content") == "after" }
            let atC = try carol.waitFor("room.message") { $0.obj("data").obj("message").str("content") == "after" }
            #expect(atB.int("offset") != nil && atB.int("offset") == atC.int("offset"))
            #expect(atB.str("epoch") == atC.str("epoch"))

            // A session from before the snapshot ends through it too: alice's node dies, and carol
            // (on the node that started from the snapshot) sees her leave.
            _ = carol.drain(for: 0.3)
            c.kill(1)
            _ = try carol.waitFor("room.memberChanged", timeout: 30) { e in
                (e.obj("data")["members"] as? [[String: Any]] ?? []).contains { $0.str("userId") == "alice" && $0.str("action") == "quit" }
            }
            try c.settle()
            let after3 = try Self.members(c, node: 3), after0 = try Self.members(c, node: 0)
            #expect(after3 == ["bob", "carol"])
            #expect(after0 == ["bob", "carol"])
        }
    }
}
