import Cluster
import Foundation
import Synchronization
import Testing
import TestKit
#if canImport(Glibc)
import Glibc
#endif

/// Issue 12, CLUSTER.md "Nonces and idempotency keys" and "A user's connections": what used to be
/// per node is judged through the shared log. With the snapshot tests (ClusterSnapshotTests.swift),
/// a serialized suite of its own: one of its clusters at a time, beside the other three-node suites.
@Suite("Cluster of three nodes: keys, a user's connections, snapshots", .serialized)
struct ClusterAcrossNodesTests {
    /// The log position of the newest entry whose payload holds `text` (nil: none yet).
    static func position(_ c: TestCluster, of text: String) -> Int? {
        guard let db = try? PGConnection(c.url),
              let rows = try? db.query("SELECT max(position) FROM roomcast_log WHERE position(convert_to($1, 'UTF8') in payload) > 0", [text]).rows
        else { return nil }
        guard let value = rows.first?.first ?? nil else { return nil }
        return Int(value)
    }

    /// Waits until an entry holding `text` is in the log and every running node has applied it.
    static func waitApplied(_ c: TestCluster, entryHolding text: String, timeout: Double = 15) throws {
        let deadline = Date().addingTimeInterval(timeout)
        var found: Int?
        while found == nil {
            found = position(c, of: text)
            guard Date() < deadline else { throw TestKitError.timeout("no log entry holds \(text)") }
            if found == nil { usleep(20_000) }
        }
        for i in c.nodes.indices where c.nodes[i] != nil {
            while try c.applied(i) < found! {
                guard Date() < deadline else { throw TestKitError.timeout("node \(i) did not apply position \(found!)") }
                usleep(10_000)
            }
        }
    }

    static func contents(_ c: TestCluster, node: Int, room: String = "r") throws -> [String] {
        let page = try c[node].rest().call("GET", "/v1/rooms/\(room)/messages?limit=100&order=asc")
        return ((page.json["messages"] as? [[String: Any]]) ?? []).compactMap { $0.str("content") }
    }

    /// Runs the calls at once, each on its own thread; their answers in the calls' order.
    static func atOnce(_ calls: [@Sendable () throws -> RESTClient.Response]) -> [RESTClient.Response?] {
        let answers = Mutex<[Int: RESTClient.Response]>([:])
        DispatchQueue.concurrentPerform(iterations: calls.count) { i in
            if let r = try? calls[i]() { answers.withLock { $0[i] = r } }
        }
        let all = answers.withLock { $0 }
        return calls.indices.map { all[$0] }
    }

    // SPEC §2 on a cluster (CL-2): a signed request is accepted once by the whole cluster. A write
    // replayed byte for byte to other nodes is refused with the single node's code (401, 40104)
    // and changes nothing anywhere; the same write sent to two nodes at once is made once; a read
    // replayed to another node after its nonce's record is applied is refused there too.
    @Test func aSignedRequestReplayedToAnotherNodeIsRefused() async throws {
        try await offPool { () throws in
            let c = try TestCluster(database: "nonces")
            #expect(try c[0].rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let rest0 = c[0].rest()

            // A write, then the same bytes to node 1 at once and to node 2 once every node has it.
            let body = Array(#"{"content":"once","fromUserId":"admin"}"#.utf8)
            let signed = rest0.signatureHeaders()
            #expect(try rest0.call("POST", "/v1/rooms/r/messages", bytes: body, headers: signed).status == 201)
            for node in [1, 2] {
                let replay = try c[node].rest().call("POST", "/v1/rooms/r/messages", bytes: body, headers: signed)
                #expect(replay.status == 401 && replay.json.int("code") == 40104 && replay.json.str("field") == "Nonce", "node \(node): \(replay.text)")
                try c.settle()
            }

            // The vendors' surfaces refuse it with their own signature code (RongCloud 1004).
            let form = Array("chatroom[rc1]=One".utf8)
            let rc = rest0.signatureHeaders()
            let made = try rest0.call("POST", "/chatroom/create.json", bytes: form, headers: rc, vendor: true)
            #expect(made.status == 200 && made.json.int("code") == 200, "\(made.text)")
            let rcReplay = try c[2].rest().call("POST", "/chatroom/create.json", bytes: form, headers: rc, vendor: true)
            #expect(rcReplay.status == 401 && rcReplay.json.int("code") == 1004, "\(rcReplay.text)")

            // The same signed write sent to nodes 1 and 2 at the same time, before either has
            // seen it: the log takes the first and every node refuses the second.
            let twice = Array(#"{"content":"at-once","fromUserId":"admin"}"#.utf8)
            let both = rest0.signatureHeaders()
            let (p1, p2) = (c[1].port, c[2].port)
            let (app, secret) = (c[0].appKey, c[0].secret)
            let answers = Self.atOnce([p1, p2].map { port in
                { try RESTClient(port: port, appKey: app, secret: secret).call("POST", "/v1/rooms/r/messages", bytes: twice, headers: both) }
            })
            #expect(answers.map { $0?.status ?? 0 }.sorted() == [201, 401], "\(answers.map { $0?.text ?? "-" })")
            #expect(answers.contains { $0?.json.int("code") == 40104 })
            try c.settle()
            for node in 0..<3 { #expect(try Self.contents(c, node: node) == ["once", "at-once"], "node \(node)") }

            // A read: answered on node 0, its nonce appended without waiting; once every node has
            // applied that record, a replay to any node is refused.
            let read = rest0.signatureHeaders()
            #expect(try rest0.call("GET", "/v1/rooms/r", headers: read).status == 200)
            let nonce = read.first { $0.0 == "Nonce" }!.1
            try Self.waitApplied(c, entryHolding: nonce)
            for node in [1, 2, 0] {
                let replay = try c[node].rest().call("GET", "/v1/rooms/r", headers: read)
                #expect(replay.status == 401 && replay.json.int("code") == 40104, "node \(node): \(replay.text)")
            }
            // So is a write that reuses a read's nonce (the engine's check, on the log).
            let reuse = try c[1].rest().call("POST", "/v1/rooms/r/messages", bytes: body, headers: read)
            #expect(reuse.status == 401 && reuse.json.int("code") == 40104)
            try c.settle()
            #expect(try Self.contents(c, node: 1) == ["once", "at-once"])
        }
    }

    // PX-2 on a cluster (CL-2): a retry with the same Idempotency-Key sent to another node is not
    // applied again: it gets the first answer (`Idempotent-Replayed: true`, the same body), or
    // 409 40900 while the first is still being answered; the key with another request gets 422
    // 42200; the same request sent to two nodes at once is made once.
    @Test func aRetryWithTheSameKeyOnAnotherNodeIsMadeOnce() async throws {
        try await offPool { () throws in
            let c = try TestCluster(database: "keys")
            #expect(try c[0].rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let (app, secret) = (c[0].appKey, c[0].secret)
            let ports = (0..<3).map { c[$0].port }
            /// `vendor`: a vendor surface, whose errors have the vendor's shape (RongCloud: in flight is
            /// 409 with its code 40902 and `errorMessage`).
            @Sendable func keyed(_ node: Int, _ key: String, _ path: String, _ body: [UInt8], vendor: Bool = false) throws -> RESTClient.Response {
                let rest = RESTClient(port: ports[node], appKey: app, secret: secret)
                return try rest.call("POST", path, bytes: body, headers: rest.signatureHeaders() + [("Idempotency-Key", key)], vendor: vendor)
            }
            /// Retries while the first is still being answered (what a client does with 40900).
            func settled(_ node: Int, _ key: String, _ path: String, _ body: [UInt8], vendor: Bool = false) throws -> RESTClient.Response {
                var r = try keyed(node, key, path, body, vendor: vendor)
                let deadline = Date().addingTimeInterval(10)
                while r.status == 409 && r.json.int("code") == (vendor ? 40902 : 40900) && Date() < deadline {
                    usleep(50_000)
                    r = try keyed(node, key, path, body, vendor: vendor)
                }
                return r
            }

            let body = Array(#"{"content":"kept","fromUserId":"admin"}"#.utf8)
            let first = try keyed(0, "k1", "/v1/rooms/r/messages", body)
            #expect(first.status == 201 && first.header("Idempotent-Replayed") == nil)
            for node in [1, 2] {
                let retry = try settled(node, "k1", "/v1/rooms/r/messages", body)
                #expect(retry.status == 201 && retry.header("Idempotent-Replayed") == "true", "node \(node): \(retry.status) \(retry.text)")
                #expect(retry.body == first.body)
            }
            let other = try keyed(2, "k1", "/v1/rooms/r/messages", Array(#"{"content":"other","fromUserId":"admin"}"#.utf8))
            #expect(other.status == 422 && other.json.int("code") == 42200 && other.json.str("field") == "Idempotency-Key", "\(other.text)")

            // The same request on nodes 1 and 2 at once: one makes it, the other is told it is
            // being answered or gets its answer.
            let both = Array(#"{"content":"both","fromUserId":"admin"}"#.utf8)
            let answers = Self.atOnce([1, 2].map { node in { try keyed(node, "k2", "/v1/rooms/r/messages", both) } })
            let made = answers.filter { $0?.status == 201 && $0?.header("Idempotent-Replayed") == nil }
            #expect(made.count == 1, "\(answers.map { "\($0?.status ?? 0) \($0?.header("Idempotent-Replayed") ?? "-")" })")
            for a in answers where a?.status != 201 || a?.header("Idempotent-Replayed") != nil {
                #expect(a?.status == 409 && a?.json.int("code") == 40900 || a?.body == made.first??.body, "\(a?.text ?? "-")")
            }
            #expect(try settled(0, "k2", "/v1/rooms/r/messages", both).header("Idempotent-Replayed") == "true")

            // A change of the members: a room made with a key, retried on another node, is not
            // made again (no 40901 "exists", no second creation event), and its answer replayed.
            let created = try keyed(0, "k3", "/v1/rooms", Array(#"{"roomId":"r2"}"#.utf8))
            #expect(created.status == 201)
            let again = try settled(2, "k3", "/v1/rooms", Array(#"{"roomId":"r2"}"#.utf8))
            #expect(again.status == 201 && again.header("Idempotent-Replayed") == "true" && again.body == created.body, "\(again.text)")

            // The vendors' surfaces too (RongCloud: the key in Idempotency-Key).
            let rcFirst = try keyed(1, "k4", "/chatroom/create.json", Array("chatroom[rc1]=One".utf8), vendor: true)
            #expect(rcFirst.status == 200 && rcFirst.json.int("code") == 200, "\(rcFirst.text)")
            let rcRetry = try settled(0, "k4", "/chatroom/create.json", Array("chatroom[rc1]=One".utf8), vendor: true)
            #expect(rcRetry.header("Idempotent-Replayed") == "true" && rcRetry.body == rcFirst.body, "\(rcRetry.text)")

            try c.settle()
            for node in 0..<3 {
                #expect(try Self.contents(c, node: node) == ["kept", "both"], "node \(node)")
                let rooms = try c[node].rest().call("GET", "/v1/rooms").json["roomIds"] as? [String]
                #expect(rooms?.sorted() == ["r", "r2", "rc1"], "node \(node)")
            }
        }
    }

    /// Waits until the client is closed by the server; its close code.
    static func waitClosed(_ client: ProtocolClient, timeout: Double = 10) -> UInt16? {
        let deadline = Date().addingTimeInterval(timeout)
        while client.closeCode == nil && Date() < deadline { _ = try? client.waitFor("~closed", timeout: 0.2) }
        return client.closeCode
    }

    /// The user's connections as node `node` lists them: (device, node URL, rooms).
    static func connections(_ c: TestCluster, node: Int, user: String) throws -> [(device: String, node: String, rooms: [String])] {
        let listed = try c[node].rest().call("GET", "/v1/users/\(user)/connections")
        return ((listed.json["connections"] as? [[String: Any]]) ?? []).map {
            ($0.str("device") ?? "", $0.str("node") ?? "", $0["rooms"] as? [String] ?? [])
        }.sorted { $0.device < $1.device }
    }

    // PX-5 on a cluster (CL-2): `DELETE /v1/users/{userId}/connections` sent to one node closes
    // the user's connections on the others with the documented close code (4010, or 4011 with
    // reconnect=true) and answers how many matched cluster-wide; another user on the same nodes
    // stays connected. The listing shows every node's connections with the node that holds each.
    @Test func disconnectingAUserReachesEveryNode() async throws {
        try await offPool { () throws in
            let c = try TestCluster(database: "disconnect")
            #expect(try c[0].rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let phone = try c[1].client("alice", device: "phone"), web = try c[2].client("alice", device: "web")
            let bob1 = try c[1].client("bob"), bob2 = try c[2].client("bob")
            _ = try phone.expectOK(try phone.command("room.join", ["roomId": "r"]))
            _ = try bob2.expectOK(try bob2.command("room.join", ["roomId": "r"]))
            try c.settle()
            let url = { (node: Int) in "ws://127.0.0.1:\(c[node].port)/ws" }

            // Node 0 lists alice's connections on nodes 1 and 2 (once its membership round has
            // seen their URLs), and her rooms.
            var listed = try Self.connections(c, node: 0, user: "alice")
            for _ in 0..<50 where listed.contains(where: { $0.node.isEmpty }) {
                usleep(100_000)
                listed = try Self.connections(c, node: 0, user: "alice")
            }
            #expect(listed.map(\.device) == ["phone", "web"] && listed.map(\.node) == [url(1), url(2)], "\(listed)")
            #expect(listed.first?.rooms == ["r"])
            #expect(try c[0].rest().call("GET", "/v1/users/alice/rooms").json["roomIds"] as? [String] == ["r"])

            // One device, allowed to come back: 4011 on node 2; the phone on node 1 stays.
            let one = try c[0].rest().call("DELETE", "/v1/users/alice/connections?device=web&reconnect=true&reason=moving")
            #expect(one.status == 200 && one.json.int("disconnected") == 1 && one.json.int("closeCode") == 4011, "\(one.text)")
            #expect(Self.waitClosed(web) == 4011)
            #expect(phone.barrier() && phone.closeCode == nil)

            // Every device: the web one again on node 2 and the phone on node 1, both 4010, from
            // node 0; bob, on the same two nodes, is not touched.
            let deadline = Date().addingTimeInterval(10)
            repeat {
                listed = try Self.connections(c, node: 0, user: "alice")
                if listed.count == 1 { break }
                usleep(50_000)
            } while Date() < deadline
            #expect(listed.map(\.device) == ["phone"])
            let web2 = try c[2].client("alice", device: "web")
            try c.settle()
            let all = try c[0].rest().call("DELETE", "/v1/users/alice/connections?reason=policy")
            #expect(all.status == 200 && all.json.int("disconnected") == 2 && all.json.int("closeCode") == 4010, "\(all.text)")
            #expect(Self.waitClosed(phone) == 4010)
            #expect(Self.waitClosed(web2) == 4010)
            // Bob's member list on node 2 hears alice leave r; bob stays connected everywhere.
            _ = try bob2.waitFor("room.memberChanged", timeout: 10) { e in
                ((e.obj("data")["members"] as? [[String: Any]]) ?? []).contains { $0.str("userId") == "alice" && $0.str("action") == "quit" }
            }
            #expect(bob1.barrier() && bob2.barrier())
            #expect(bob1.closeCode == nil && bob2.closeCode == nil)
            // Their disconnects come back through the log: gone from every node's listing.
            var left = try Self.connections(c, node: 1, user: "alice")
            for _ in 0..<100 where !left.isEmpty {
                usleep(50_000)
                left = try Self.connections(c, node: 1, user: "alice")
            }
            #expect(left.isEmpty)
            #expect(try Self.connections(c, node: 2, user: "bob").map(\.node).sorted() == [url(1), url(2)].sorted())
            // Nobody matches: 0.
            #expect(try c[1].rest().call("DELETE", "/v1/users/nobody/connections").json.int("disconnected") == 0)
            // Bad input is refused with the field named, and changes nothing.
            let bad = try c[0].rest().call("DELETE", "/v1/users/bob/connections?reason=" + String(repeating: "r", count: 101))
            #expect(bad.status == 400 && bad.json.str("field") == "reason")
            #expect(bob1.barrier() && bob2.barrier())
        }
    }
}
