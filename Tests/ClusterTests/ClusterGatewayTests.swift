import Cluster
import Foundation
import Synchronization
import Testing
import TestKit
#if canImport(Glibc)
import Glibc
#endif

/// Three `roomcast` nodes on one PostgreSQL 15 (CLUSTER.md): clients spread over the nodes, REST
/// calls sent to another node than the clients, and the cluster behaving as one server.
final class TestCluster {
    let pg: PostgresServer
    let url: String
    var nodes: [GatewayProcess?] = []
    let timeout: Int

    init(nodes count: Int = 3, nodeTimeout: Int = 3, database: String) throws {
        pg = try PostgresServer()
        let admin = try PGConnection(pg.url())
        try admin.query("CREATE DATABASE " + admin.quotedIdentifier(database))
        url = pg.url(database)
        timeout = nodeTimeout
        // CL-1: each node migrates (once for the cluster) and registers; they catch up together.
        nodes = try (0..<count).map { i in try Self.start(i, url: url, timeout: nodeTimeout) }
        for i in 0..<count { try waitReady(i) }
    }

    func start(_ i: Int) throws -> GatewayProcess { try Self.start(i, url: url, timeout: timeout) }

    static func start(_ i: Int, url: String, timeout: Int) throws -> GatewayProcess {
        try GatewayProcess(extra: ["--cluster", url, "--node-id", "n\(i)", "--node-timeout", "\(timeout)", "--event-loops", "1",
                                   "--presence-grace", "0"])
    }

    func restart(_ i: Int) throws {
        nodes[i] = try start(i)
        try waitReady(i)
    }

    subscript(_ i: Int) -> GatewayProcess { nodes[i]! }

    func kill(_ i: Int) {
        nodes[i]?.stop()
        nodes[i] = nil
    }

    /// The node's /readyz as JSON once it answers 200.
    @discardableResult
    func waitReady(_ i: Int, timeout: Double = 60) throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let r = try? self[i].rest().call("GET", "/readyz"), r.status == 200 { return r.json }
            usleep(50_000)
        }
        throw TestKitError.timeout("node \(i) not ready:\n\(self[i].process.log)")
    }

    func readyz(_ i: Int) throws -> RESTClient.Response { try self[i].rest().call("GET", "/readyz") }

    deinit { for n in nodes { n?.stop() } }
}

@Suite("Cluster of three nodes on PostgreSQL", .serialized)
struct ClusterGatewayTests {
    static func contents(_ events: [[String: Any]]) -> [String] {
        events.filter { $0.str("ev") == "room.message" }.compactMap { $0.obj("data").obj("message").str("content") }
    }

    // CL-1, CL-2, BX-1, CL-5: one chat across three nodes.
    @Test func threeNodesServeOneChat() async throws {
        try await offPool { () throws in
            let c = try TestCluster(database: "chat")
            // CL-5: every node lists the three members.
            var members: [String] = []
            for _ in 0..<60 {
                members = ((try c.readyz(0).json["cluster"] as? [String: Any])?["members"] as? [[String: Any]] ?? []).compactMap { $0.str("node") }
                if members.count == 3 { break }
                usleep(100_000)
            }
            #expect(members == ["n0", "n1", "n2"])

            // The room is made on node 2; alice is on node 0, bob on node 1, carol (not in the
            // room) on node 1 too.
            #expect(try c[2].rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let alice = try c[0].client("alice"), bob = try c[1].client("bob"), carol = try c[1].client("carol")
            let joinedA = try alice.expectOK(try alice.command("room.join", ["roomId": "r"]))
            _ = try bob.expectOK(try bob.command("room.join", ["roomId": "r"]))
            // Alice, on another node, sees bob arrive.
            let arrived = try alice.waitFor("room.memberChanged").obj("data")["members"] as? [[String: Any]] ?? []
            #expect(arrived.contains { $0.str("userId") == "bob" })

            // A REST message on node 2 reaches both, with the same offset and epoch.
            #expect(try c[2].rest().call("POST", "/v1/rooms/r/messages", ["content": "from-rest", "fromUserId": "admin"]).status == 201)
            let atA = try alice.waitFor("room.message") { $0.obj("data").obj("message").str("content") == "from-rest" }
            let atB = try bob.waitFor("room.message") { $0.obj("data").obj("message").str("content") == "from-rest" }
            #expect(atA.int("offset") != nil && atA.int("offset") == atB.int("offset"))
            #expect(atA.str("epoch") != nil && atA.str("epoch") == atB.str("epoch"))
            #expect(atA.obj("data").obj("message").str("messageId") == atB.obj("data").obj("message").str("messageId"))
            // Carol, on bob's node but not in the room, receives none of it.
            #expect(Self.contents(carol.drain(for: 0.3)).isEmpty)

            // A client's message on node 0 reaches node 1.
            _ = try alice.expectOK(try alice.command("room.send", ["roomId": "r", "content": "hello"]))
            let hello = try bob.waitFor("room.message") { $0.obj("data").obj("message").str("content") == "hello" }
            let epoch = hello.str("epoch")!, offset = hello.int("offset")!
            let stream = bob.stream
            #expect(!stream.isEmpty && alice.stream == stream)
            _ = joinedA

            // BX-1: bob drops from node 1 and resumes on node 2 with exactly what he missed.
            bob.ws.tcp.setTimeout(0.1)
            _ = Glibc.shutdown(bob.ws.tcp.fd, Int32(SHUT_RDWR))
            for i in 0..<3 { _ = try alice.expectOK(try alice.command("room.send", ["roomId": "r", "content": "missed\(i)"])) }
            let back = try c[2].client("bob")
            _ = try back.expectOK(try back.command("room.join", ["roomId": "r", "resume": ["epoch": epoch, "stream": stream, "offset": offset]]))
            let events = back.drain(for: 0.6)
            #expect(Self.contents(events) == ["missed0", "missed1", "missed2"])
            #expect(events.first { $0.str("ev") == "room.resume" }?.obj("data")["resumed"] as? Bool == true)

            // Reads on any node agree: the members and the history.
            for i in 0..<3 {
                let history = try c[i].rest().call("GET", "/v1/rooms/r/messages?limit=10&order=asc")
                let texts = ((history.json["messages"] as? [[String: Any]]) ?? []).compactMap { $0.str("content") }
                #expect(texts == ["from-rest", "hello", "missed0", "missed1", "missed2"], "node \(i)")
            }

            // CL-5: the address lookup hands out the live nodes' URLs; a node that joins later is in it.
            func addresses(_ node: Int, count: Int) throws -> [String] {
                var urls: [String] = []
                for _ in 0..<50 {
                    urls = try c[node].rest().call("GET", "/v1/rooms/r/address?clientType=web").json["addresses"] as? [String] ?? []
                    if urls.count == count { break }
                    usleep(100_000)
                }
                return urls.sorted()
            }
            #expect(try addresses(1, count: 3) == (0..<3).map { "ws://127.0.0.1:\(c[$0].port)/ws" }.sorted())
            c.nodes.append(try TestCluster.start(3, url: c.url, timeout: c.timeout))
            try c.waitReady(3)
            #expect(try addresses(0, count: 4) == (0..<4).map { "ws://127.0.0.1:\(c[$0].port)/ws" }.sorted())
            // The late node has the whole chat: history, and live messages.
            let late = try c[3].client("erin")
            _ = try late.expectOK(try late.command("room.join", ["roomId": "r"]))
            let texts = ((try c[3].rest().call("GET", "/v1/rooms/r/messages?limit=10&order=asc").json["messages"] as? [[String: Any]]) ?? [])
                .compactMap { $0.str("content") }
            #expect(texts == ["from-rest", "hello", "missed0", "missed1", "missed2"])
            _ = try alice.expectOK(try alice.command("room.send", ["roomId": "r", "content": "to-erin"]))
            #expect(try late.waitFor("room.message").obj("data").obj("message").str("content") == "to-erin")
        }
    }
}
