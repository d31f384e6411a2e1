import Cluster
import Foundation
import Synchronization
import Testing
import TestKit
import Webhooks
#if canImport(Glibc)
import Glibc
#endif

@Suite("Cluster of three nodes on PostgreSQL", .serialized)
struct ClusterGatewayTests {
    static func contents(_ events: [[String: Any]]) -> [String] {
        events.filter { $0.str("ev") == "room.message" }.compactMap { $0.obj("data").obj("message").str("content") }
    }

    // BX-5, CL-1, CL-2, BX-1, CL-5: one chat across three nodes.
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

            // Each change wakes the other nodes' log readers: ten messages one after another, each
            // answered on node 2 and received on node 1, take well under the ten seconds a reader
            // that let wake-ups pass (waiting for its timed read each second) would need (it took
            // 10.0 s); 7 s leaves a loaded machine room.
            // (A room of its own, whose history the checks below do not read.)
            #expect(try c[2].rest().call("POST", "/v1/rooms", ["roomId": "seq"]).status == 201)
            let dave = try c[1].client("dave")
            _ = try dave.expectOK(try dave.command("room.join", ["roomId": "seq"]))
            let started = Date()
            for i in 0..<10 {
                #expect(try c[2].rest().call("POST", "/v1/rooms/seq/messages", ["content": "seq-\(i)", "fromUserId": "admin"]).status == 201)
                _ = try dave.waitFor("room.message", timeout: 5) { $0.obj("data").obj("message").str("content") == "seq-\(i)" }
            }
            #expect(Date().timeIntervalSince(started) < 7, "ten messages took \(Date().timeIntervalSince(started)) s")

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
            try c.settle()
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

    static func members(_ c: TestCluster, node: Int, room: String = "r") throws -> [String] {
        let r = try c[node].rest().call("GET", "/v1/rooms/\(room)/members?limit=100")
        return ((r.json["members"] as? [[String: Any]]) ?? []).compactMap { $0.str("userId") }.sorted()
    }

    // CL-4: a killed node's sessions leave their rooms, with the usual events to the members on
    // other nodes, within the failure timeout (CL-6: within a few beats, when PostgreSQL shows its
    // session gone); a restarted node ends its previous run's sessions at once.
    @Test func aKilledNodesSessionsLeaveTheirRooms() async throws {
        try await offPool { () throws in
            let c = try TestCluster(nodeTimeout: 12, database: "failure")
            #expect(try c[0].rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let alice = try c[0].client("alice"), bob = try c[1].client("bob"), carol = try c[2].client("carol")
            for client in [alice, bob, carol] { _ = try client.expectOK(try client.command("room.join", ["roomId": "r"])) }
            // Joins made on nodes 1 and 2 are read on node 0 once it has applied them.
            try c.settle()
            #expect(try Self.members(c, node: 0) == ["alice", "bob", "carol"])
            _ = alice.drain(for: 0.3)

            // Node 1 is killed (kill -9): PostgreSQL sees its session end, so the leader ends its
            // run after a few missed beats (CL-6), well before the node timeout (12 s); bob leaves
            // on every node and alice is told.
            let killed = Date()
            c.kill(1)
            let left = try alice.waitFor("room.memberChanged", timeout: 15) { e in
                ((e.obj("data")["members"] as? [[String: Any]]) ?? []).contains { $0.str("userId") == "bob" && $0.str("action") == "quit" }
            }
            let took = Date().timeIntervalSince(killed)
            #expect(took >= 2, "bob left before the node could have missed its beats: \(took) s")
            // The timeout alone would take at least timeout - 1 s (the last beat was at most a
            // second before the kill).
            #expect(took < Double(c.timeout) - 1.5, "bob left after \(took) s: not before the node timeout")
            _ = left
            try c.settle()
            #expect(try Self.members(c, node: 2) == ["alice", "carol"])
            #expect(try Self.members(c, node: 0) == ["alice", "carol"])

            // Node 2 is killed and started again at once: its new run ends carol's session itself,
            // long before the timeout would have.
            c.kill(2)
            let restarted = Date()
            try c.restart(2)
            _ = try alice.waitFor("room.memberChanged", timeout: 10) { e in
                ((e.obj("data")["members"] as? [[String: Any]]) ?? []).contains { $0.str("userId") == "carol" && $0.str("action") == "quit" }
            }
            // Before the node timeout could have done it (the leader waits at least that long).
            #expect(Date().timeIntervalSince(restarted) < Double(c.timeout))
            try c.settle()
            #expect(try Self.members(c, node: 2) == ["alice"])
            // The cluster lists the live nodes only.
            var nodes: [String] = []
            for _ in 0..<100 {
                nodes = ((try c.readyz(0).json["cluster"] as? [String: Any])?["members"] as? [[String: Any]] ?? []).compactMap { $0.str("node") }
                if nodes == ["n0", "n2"] { break }
                usleep(100_000)
            }
            #expect(nodes == ["n0", "n2"])
        }
    }

    // CL-3: PostgreSQL down: writes get 503 50301 with Retry-After, reads and WebSockets stay up,
    // and the nodes reconnect by themselves.
    @Test func postgresDownRefusesWritesAndTheNodesReconnect() async throws {
        try await offPool { () throws in
            let c = try TestCluster(database: "outage")
            #expect(try c[0].rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let alice = try c[0].client("alice"), bob = try c[1].client("bob"), carol = try c[2].client("carol")
            for client in [alice, bob, carol] { _ = try client.expectOK(try client.command("room.join", ["roomId": "r"])) }
            try c.settle()
            _ = alice.drain(for: 0.2)

            try c.pg.stop()
            // Carol's connection closes while her node cannot reach the log: her disconnect is
            // owed, and appended once PostgreSQL is back (she must not stay a member anywhere).
            carol.ws.tcp.setTimeout(0.1)
            _ = Glibc.shutdown(carol.ws.tcp.fd, Int32(SHUT_RDWR))
            // The first write may be the one that finds the connection gone; either way 503 50301.
            for node in [0, 1, 0] {
                let r = try c[node].rest().call("POST", "/v1/rooms/r/messages", ["content": "during", "fromUserId": "admin"])
                #expect(r.status == 503 && r.json["code"] as? Int == 50301, "\(r.status) \(r.text)")
                #expect(r.header("Retry-After") != nil)
            }
            let refused = try alice.command("room.send", ["roomId": "r", "content": "ws-during"])
            #expect(refused.obj("error").int("code") == 50301)
            // Reads and connections continue from each node's replica.
            #expect(try Self.members(c, node: 1) == ["alice", "bob", "carol"])
            #expect(try c[0].rest().call("GET", "/v1/rooms/r/messages?limit=5").status == 200)
            #expect(try c.readyz(0).status == 503)

            try c.pg.start()
            var status = 0
            let deadline = Date().addingTimeInterval(20)
            while Date() < deadline {
                status = (try? c[0].rest().call("POST", "/v1/rooms/r/messages", ["content": "after", "fromUserId": "admin"]))?.status ?? 0
                if status == 201 { break }
                usleep(200_000)
            }
            #expect(status == 201)
            #expect(try bob.waitFor("room.message", timeout: 10).obj("data").obj("message").str("content") == "after")
            _ = try alice.waitFor("room.memberChanged", timeout: 10) { e in
                ((e.obj("data")["members"] as? [[String: Any]]) ?? []).contains { $0.str("userId") == "carol" && $0.str("action") == "quit" }
            }
            try c.settle()
            for node in 0..<3 { #expect(try Self.members(c, node: node) == ["alice", "bob"], "node \(node)") }
            // Nothing written while it was down exists.
            let texts = ((try c[1].rest().call("GET", "/v1/rooms/r/messages?limit=10").json["messages"] as? [[String: Any]]) ?? [])
                .compactMap { $0.str("content") }
            #expect(texts == ["after"])
            for i in 0..<3 { try c.waitReady(i, timeout: 20) }
            #expect(alice.closeCode == nil && bob.closeCode == nil)
        }
    }

    /// Writers send numbered messages to the given nodes until told to stop; returns the numbers
    /// acknowledged with 201.
    final class Flag: Sendable {
        private let value = Atomic<Bool>(true)
        var isSet: Bool { value.load(ordering: .relaxed) }
        func clear() { value.store(false, ordering: .relaxed) }
    }

    /// Rooms per writer and messages per room of `writeLoad` (history pages hold 100).
    static let roomsPerWriter = 10, perRoom = 100

    static func room(_ phase: String, _ w: Int, _ i: Int) -> String { "\(phase)-\(w)-\(i / perRoom)" }

    /// Writers send numbered messages to the given nodes until told to stop (at most
    /// `roomsPerWriter * perRoom` each); returns the messages acknowledged with 201.
    static func writeLoad(_ c: TestCluster, phase: String, nodes: [Int], writers: Int, while running: Flag)
        -> (acked: [String], refused: [String], answers: [String: Int]) {
        let acked = Mutex<[String]>([]), refused = Mutex<[String]>([])
        // Every answer by status and code (a failure's message says what the load saw).
        let answers = Mutex<[String: Int]>([:])
        let ports = nodes.map { c[$0].port }
        let app = c[0].appKey, secret = c[0].secret
        let group = DispatchGroup()
        for w in 0..<writers {
            DispatchQueue.global().async(group: group) {
                var i = 0
                while running.isSet && i < roomsPerWriter * perRoom {
                    let content = "\(phase)-\(w)-\(i)"
                    let rest = RESTClient(port: ports[(w + i) % ports.count], appKey: app, secret: secret)
                    do {
                        let r = try rest.call("POST", "/v1/rooms/\(room(phase, w, i))/messages", ["content": content, "fromUserId": "admin"])
                        answers.withLock { $0["\(r.status)/\(r.json.int("code") ?? 0)", default: 0] += 1 }
                        if r.status == 201 {
                            acked.withLock { $0.append(content) }
                            // What answered it (for a failure's message): the port, the message id
                            // (its log position is inside) and the answer's body.
                            answered.withLock { $0[content] = "port \(rest.port): \(r.text)" }
                        }
                        // 50301 says nothing changed (50303 would say it may have).
                        if r.status == 503, r.json.int("code") == 50301 { refused.withLock { $0.append(content) } }
                    } catch {
                        answers.withLock { $0["no answer", default: 0] += 1 }
                    }
                    i += 1
                    usleep(2_000)
                }
            }
        }
        group.wait()
        return (acked.withLock { $0 }, refused.withLock { $0 }, answers.withLock { $0 })
    }

    /// The answers of acknowledged writes, by content (for a failure's message).
    static let answered = Mutex<[String: String]>([:])

    /// Where the log has these messages (for a failure's message), with the answer each got and
    /// the entries holding the content anywhere in their payload.
    static func whereIs(_ c: TestCluster, _ contents: ArraySlice<String>) -> String {
        guard let db = try? PGConnection(c.url) else { return "(no database)" }
        return contents.map { content in
            let anywhere = (try? db.query("SELECT position, origin, seq, at, encode(payload, 'hex') FROM roomcast_log WHERE position(convert_to($1, 'UTF8') in payload) > 0",
                                          [content]).rows) ?? []
            // The message id names the entry that made it: "<time>-<position>-<n>" in base 36.
            let answer = answered.withLock { $0[content] } ?? "?"
            var named = ""
            if let r = answer.range(of: #""messageId":""#), let id = answer[r.upperBound...].split(separator: "\"").first {
                let parts = id.split(separator: "-")
                if parts.count == 3, let p = Int64(parts[1], radix: 36) {
                    let row = (try? db.query("SELECT position, origin, seq, at, encode(payload, 'hex') FROM roomcast_log WHERE position = $1",
                                             [String(p)]).rows.first) ?? nil
                    named = "; the entry its id names (\(p)): \(row.map { $0.map { $0 ?? "-" }.joined(separator: "/") } ?? "none")"
                }
            }
            return "\(content) answered \(answer)\(named); entries holding it: \(anywhere.map { $0.map { $0 ?? "-" }.joined(separator: "/") }); "
                + whereExactly(db, content)
        }.joined(separator: "; ")
    }

    static func whereExactly(_ db: PGConnection, _ content: String) -> String {
        [content].map { content in
            // A message's content ends its entry (the binary sendMessage record), after its length.
            let n = content.utf8.count
            let rows = (try? db.query("""
                SELECT position, origin, seq, at FROM roomcast_log WHERE octet_length(payload) > $2::int
                    AND substring(payload FROM octet_length(payload) - $2::int + 1) = convert_to($1, 'UTF8')
                    AND get_byte(payload, octet_length(payload) - $2::int - 1) = $2::int
                """, [content, String(n)]).rows) ?? []
            return "\(content) at \(rows.map { $0.map { $0 ?? "-" }.joined(separator: "/") })"
        }.joined(separator: "; ")
    }

    static func createRooms(_ c: TestCluster, phase: String, writers: Int) throws {
        for w in 0..<writers {
            for r in 0..<roomsPerWriter {
                #expect(try c[0].rest().call("POST", "/v1/rooms", ["roomId": room(phase, w, r * perRoom)]).status == 201)
            }
        }
    }

    static func stored(_ c: TestCluster, node: Int, phases: [String], writers: Int) throws -> Set<String> {
        var all = Set<String>()
        for phase in phases {
            for w in 0..<writers {
                for r in 0..<roomsPerWriter {
                    let page = try c[node].rest().call("GET", "/v1/rooms/\(room(phase, w, r * perRoom))/messages?limit=\(perRoom)")
                    #expect(page.status == 200)
                    all.formUnion(((page.json["messages"] as? [[String: Any]]) ?? []).compactMap { $0.str("content") })
                }
            }
        }
        return all
    }

    // CL-3: kill -9 of a node under write load, then kill -9 of PostgreSQL under write load:
    // every acknowledged message is in the history of every live node.
    @Test func killsUnderWriteLoadLoseNoAcknowledgedChange() async throws {
        try await offPool { () throws in
            let c = try TestCluster(database: "kills")
            let writers = 6
            try Self.createRooms(c, phase: "a", writers: writers)
            try Self.createRooms(c, phase: "b", writers: writers)

            // A node dies mid-load (the writers send to all three).
            let running = Flag()
            let killer = Thread {
                usleep(1_200_000)
                c.kill(2)
                usleep(1_200_000)
                running.clear()
            }
            killer.start()
            let (first, firstRefused, firstAnswers) = Self.writeLoad(c, phase: "a", nodes: [0, 1, 2], writers: writers, while: running)
            #expect(first.count > 50, "only \(first.count) writes acknowledged: \(firstAnswers)")

            // PostgreSQL dies mid-load and comes back.
            let again = Flag()
            let crasher = Thread {
                usleep(1_000_000)
                c.pg.kill9()
                usleep(500_000)
                try? c.pg.start()
                usleep(3_000_000)
                again.clear()
            }
            crasher.start()
            let (second, secondRefused, secondAnswers) = Self.writeLoad(c, phase: "b", nodes: [0, 1], writers: writers, while: again)
            #expect(second.count > 50, "only \(second.count) writes acknowledged: \(secondAnswers)")
            // PostgreSQL was down for a while: some writes were refused.
            #expect(!secondRefused.isEmpty, "answers while PostgreSQL was killed and restarted: \(secondAnswers)")

            let acked = Set(first + second), refused = Set(firstRefused + secondRefused)
            try c.settle(timeout: 30)
            for node in [0, 1] {
                let stored = try Self.stored(c, node: node, phases: ["a", "b"], writers: writers)
                let lost = acked.subtracting(stored)
                #expect(lost.count == 0, "node \(node) lost \(lost.count) of \(acked.count) acknowledged, e.g. \(lost.sorted().prefix(5)): \(Self.whereIs(c, lost.sorted().prefix(3)))")
                // A write answered "nothing changed" did not happen.
                let made = refused.intersection(stored)
                #expect(made.isEmpty, "node \(node) has \(made.count) writes that were answered 50301, e.g. \(made.sorted().prefix(5))")
            }
            try c.restart(2)
            let stored = try Self.stored(c, node: 2, phases: ["a", "b"], writers: writers)
            #expect(acked.subtracting(stored).count == 0)
            #expect(try Self.stored(c, node: 0, phases: ["a", "b"], writers: writers) == stored)
        }
    }

    // CL-6: with an endpoint configured on every node, each message is delivered once by the
    // cluster, not once per node (duplicates by webhook-id and by content: 0); every node has the
    // endpoint, the same. (PX-5's disconnect is `disconnectingAUserReachesEveryNode`.)
    @Test func eachWebhookMessageIsDeliveredOnceByTheCluster() async throws {
        try await offPool { () throws in
            let receiver = try HTTPReceiver()
            defer { receiver.stop() }
            let c = try TestCluster(database: "webhooks", extra: [
                "--webhook", "testapp \(receiver.url()) allow-private events=message.sent",
                "--webhook-allow-private", "testapp",
            ])
            #expect(try c[0].rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let alice = try c[1].client("alice")
            _ = try alice.expectOK(try alice.command("room.join", ["roomId": "r"]))
            var sent: [String] = []
            for i in 0..<30 {
                let content = "m\(i)"
                #expect(try c[i % 3].rest().call("POST", "/v1/rooms/r/messages", ["content": content, "fromUserId": "admin"]).status == 201)
                sent.append(content)
            }
            for i in 0..<10 {
                _ = try alice.expectOK(try alice.command("room.send", ["roomId": "r", "content": "ws\(i)"]))
                sent.append("ws\(i)")
            }
            func contents() -> [String] {
                receiver.requests.compactMap { r in
                    ((r.json as? [String: Any])?["data"] as? [String: Any]).flatMap { ($0["details"] as? [String: Any])?["content"] as? String }
                }
            }
            let deadline = Date().addingTimeInterval(15)
            while contents().count < sent.count && Date() < deadline { usleep(50_000) }
            usleep(1_000_000) // a duplicate from another node would arrive by now
            #expect(contents().sorted() == sent.sorted())
            let ids = receiver.requests.compactMap { $0.header("webhook-id") }
            #expect(ids.count == sent.count && Set(ids).count == ids.count)

            // The command line's endpoint is one endpoint for the cluster (made once, through the log).
            let listed = try (0..<3).map { try c[$0].rest().call("GET", "/v1/webhooks").json["endpoints"] as? [[String: Any]] ?? [] }
            #expect(listed[0].count == 1 && listed[0].first?.str("origin") == "config")
            for i in 1..<3 { #expect(NSArray(array: listed[i]).isEqual(to: listed[0]), "node \(i)") }
            // A node started with the endpoint changed on its command line changes it for the
            // cluster (as a single node does at start), and is ready once it has.
            c.nodes.append(try TestCluster.start(3, url: c.url, timeout: c.timeout, extra: [
                "--webhook", "testapp \(receiver.url()) allow-private events=message.sent,member.joined", "--webhook-allow-private", "testapp",
            ]))
            try c.waitReady(3)
            try c.settle()
            for i in 0..<4 {
                let endpoints = try c[i].rest().call("GET", "/v1/webhooks").json["endpoints"] as? [[String: Any]] ?? []
                #expect(endpoints.count == 1 && endpoints.first?.str("id") == listed[0].first?.str("id"), "node \(i)")
                #expect(endpoints.first?["events"] as? [String] == ["message.sent", "member.joined"], "node \(i)")
            }
        }
    }

    /// A receiver's record of one request: the message's content, its id and what it was answered.
    struct Answered: Sendable {
        var content: String
        var id: String
        var status: Int
    }

    /// A webhook receiver that answers 503 while `failing`, else 204, and remembers its answers.
    final class Receiver: Sendable {
        let http: HTTPReceiver
        let failing = Atomic<Bool>(false)
        let answered = Mutex<[Answered]>([])

        init() throws {
            http = try HTTPReceiver()
            http.respond { [self] r in
                let status = failing.load(ordering: .relaxed) ? 503 : 204
                let content = ((r.json as? [String: Any])?["data"] as? [String: Any]).flatMap { ($0["details"] as? [String: Any])?["content"] as? String }
                answered.withLock { $0.append(Answered(content: content ?? "", id: r.header("webhook-id") ?? "", status: status)) }
                return HTTPReceiver.Answer(status: status)
            }
        }

        var all: [Answered] { answered.withLock { $0 } }
        /// The messages answered 2xx, by content, with how many times.
        var delivered: [String: Int] {
            var counts: [String: Int] = [:]
            for a in all where a.status == 204 { counts[a.content, default: 0] += 1 }
            return counts
        }
    }

    // CL-6, WH-4: the node that caused messages is killed (kill -9) while they are pending on it
    // (their first attempts were answered 503): the surviving nodes deliver every one of them,
    // within the node timeout and a membership round, each once (a duplicate could only be a
    // message the dead node had delivered: here it delivered none).
    @Test func aKilledNodesPendingWebhooksAreDeliveredByTheOthers() async throws {
        try await offPool { () throws in
            let receiver = try Receiver()
            defer { receiver.http.stop() }
            receiver.failing.store(true, ordering: .relaxed)
            let c = try TestCluster(nodeTimeout: 8, database: "webhook_takeover", extra: [
                "--webhook", "testapp \(receiver.http.url()) allow-private events=message.sent",
                "--webhook-allow-private", "testapp",
                // After the first attempt the next would come 30 s later: the killed node makes one.
                "--webhook-retry-schedule", "30s,30s",
            ])
            // The origin is a node that does not lead (the leader would have to be replaced first).
            var origin = 0
            for i in 0..<3 where ((try c.readyz(i).json["cluster"] as? [String: Any])?["leader"] as? Bool) == false { origin = i }
            #expect(try c[origin].rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let sent = (0..<20).map { "m\($0)" }
            for content in sent {
                #expect(try c[origin].rest().call("POST", "/v1/rooms/r/messages", ["content": content, "fromUserId": "admin"]).status == 201)
            }
            // Every message had its first attempt, from the origin, answered 503.
            #expect(receiver.http.wait(timeout: 15) { Set($0.count >= sent.count ? receiver.all.map(\.content) : []) == Set(sent) })
            c.kill(origin)
            let killed = Date()
            receiver.failing.store(false, ordering: .relaxed)

            let deadline = Date().addingTimeInterval(Double(c.timeout) + 15)
            while Set(receiver.delivered.keys) != Set(sent) && Date() < deadline { usleep(50_000) }
            let took = Date().timeIntervalSince(killed)
            #expect(Set(receiver.delivered.keys) == Set(sent), "delivered: \(receiver.delivered.keys.sorted())")
            #expect(took < Double(c.timeout) + 10, "took \(took) s")
            usleep(1_000_000) // a second sender would have sent by now
            let duplicates = receiver.delivered.filter { $0.value > 1 }
            #expect(duplicates.isEmpty, "sent twice: \(duplicates)")
            // The same message (same id) the dead node tried first.
            let ids = Dictionary(grouping: receiver.all, by: \.content).mapValues { Set($0.map(\.id)) }
            #expect(ids.values.allSatisfy { $0.count == 1 })

            // The surviving nodes' delivery logs agree: every message delivered (the taking node's
            // outcomes came through the log).
            let survivors = (0..<3).filter { $0 != origin }
            let endpoint = try c[survivors[0]].rest().call("GET", "/v1/webhooks").json["endpoints"] as? [[String: Any]] ?? []
            let id = endpoint.first?.str("id") ?? ""
            var logs: [[String]] = []
            for _ in 0..<100 {
                logs = try survivors.map { node in
                    let page = try c[node].rest().call("GET", "/v1/webhooks/\(id)/deliveries?limit=100").json["deliveries"] as? [[String: Any]] ?? []
                    return page.map { "\($0.str("messageId") ?? "") \($0.str("status") ?? "")" }.sorted()
                }
                if logs.allSatisfy({ $0.count == sent.count && $0.allSatisfy { $0.hasSuffix(" delivered") } }) && logs[0] == logs[1] { break }
                usleep(100_000)
            }
            #expect(logs[0].count == sent.count && logs[0].allSatisfy { $0.hasSuffix(" delivered") }, "\(logs[0])")
            #expect(logs[0] == logs[1])

            // A node that stops by itself (SIGTERM) with messages pending: the leader takes them
            // at once (its next tick), long before a node timeout.
            try c.restart(origin)
            receiver.failing.store(true, ordering: .relaxed)
            let more = (0..<10).map { "n\($0)" }
            for content in more {
                #expect(try c[origin].rest().call("POST", "/v1/rooms/r/messages", ["content": content, "fromUserId": "admin"]).status == 201)
            }
            #expect(receiver.http.wait(timeout: 15) { _ in Set(receiver.all.map(\.content)).isSuperset(of: more) })
            // The receiver recovers before the node stops: the run that takes the deliveries over
            // sends them as soon as the leaving run's end is applied, before this process has
            // exited (its engine and store stop after it left) and before waitForExit returns (it
            // also waits up to 2 s for the output pipe). Recovering only after that let those first
            // attempts fail too, and the next was 30 s away (the flaky "none of n0..n9 within
            // 15 s"). The origin itself does not send them meanwhile: its
            // next attempts are 30 s away and it stops its delivery thread first.
            receiver.failing.store(false, ordering: .relaxed)
            c[origin].process.signal(SIGTERM)
            #expect(c[origin].process.waitForExit(timeout: 20) == 0)
            c.nodes[origin] = nil
            let stopped = Date()
            while !Set(receiver.delivered.keys).isSuperset(of: more) && Date().timeIntervalSince(stopped) < 15 { usleep(50_000) }
            #expect(Set(receiver.delivered.keys).isSuperset(of: more), "delivered: \(receiver.delivered.keys.sorted())")
            #expect(Date().timeIntervalSince(stopped) < Double(c.timeout), "took \(Date().timeIntervalSince(stopped)) s")
            usleep(1_000_000)
            #expect(receiver.delivered.filter { $0.value > 1 }.isEmpty)
        }
    }

    // CL-6, WH-1, WH-3, WH-4: an endpoint created through REST on node A is the cluster's: it
    // receives the messages caused on nodes B and C (signed with the secret node A answered), node
    // C's delivery log shows the deliveries node A made, and it is changed, rotated, replayed and
    // deleted through other nodes.
    @Test func anEndpointMadeThroughOneNodeServesTheWholeCluster() async throws {
        try await offPool { () throws in
            let receiver = try Receiver()
            defer { receiver.http.stop() }
            let c = try TestCluster(database: "webhook_rest", extra: ["--webhook-allow-private", "testapp"])
            let created = try c[0].rest().call("POST", "/v1/webhooks", ["url": receiver.http.url(), "allowPrivateNetwork": true, "events": ["message.sent"]])
            #expect(created.status == 201, "\(created.text)")
            let endpoint = created.json.obj("endpoint")
            let id = endpoint.str("id") ?? "", secret = endpoint.str("secret") ?? ""
            #expect(id.hasPrefix("ep_") && secret.hasPrefix("whsec_"))
            // Bad input is refused with its field, and changes nothing.
            let bad = try c[1].rest().call("POST", "/v1/webhooks", ["url": "ftp://example.com/x"])
            #expect(bad.status == 400 && bad.json.str("field") == "url", "\(bad.text)")
            try c.settle()
            for node in 0..<3 {
                let listed = try c[node].rest().call("GET", "/v1/webhooks").json["endpoints"] as? [[String: Any]] ?? []
                #expect(listed.count == 1 && listed.first?.str("id") == id && listed.first?.int("createdAt") == endpoint.int("createdAt"), "node \(node)")
            }

            #expect(try c[0].rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let carol = try c[2].client("carol")
            _ = try carol.expectOK(try carol.command("room.join", ["roomId": "r"]))
            var sent: [String] = []
            for i in 0..<5 {
                for (node, name) in [(1, "b"), (2, "c"), (0, "a")] {
                    #expect(try c[node].rest().call("POST", "/v1/rooms/r/messages", ["content": "\(name)\(i)", "fromUserId": "admin"]).status == 201)
                    sent.append("\(name)\(i)")
                }
                _ = try carol.expectOK(try carol.command("room.send", ["roomId": "r", "content": "ws\(i)"]))
                sent.append("ws\(i)")
            }
            #expect(receiver.http.wait(timeout: 15) { $0.count >= sent.count })
            usleep(1_000_000)
            #expect(receiver.all.map(\.content).sorted() == sent.sorted())
            // Signed with the secret node A made and answered, whichever node sent it.
            for r in receiver.http.requests {
                let timestamp = Int64(r.header("webhook-timestamp") ?? "") ?? 0
                #expect(r.header("webhook-signature") == StandardWebhooks.signature(id: r.header("webhook-id") ?? "", timestamp: timestamp, body: r.body,
                                                                                    secrets: [secret]))
            }

            // Node C's delivery log shows every delivery, those node A made included, as node A's does.
            let byId = Dictionary(uniqueKeysWithValues: receiver.all.map { ($0.id, $0.content) })
            func log(_ node: Int) throws -> [[String: Any]] {
                try c[node].rest().call("GET", "/v1/webhooks/\(id)/deliveries?limit=100").json["deliveries"] as? [[String: Any]] ?? []
            }
            var atC: [[String: Any]] = [], atA: [[String: Any]] = []
            for _ in 0..<100 {
                atC = try log(2)
                atA = try log(0)
                if atC.count == sent.count && atC.allSatisfy({ $0.str("status") == "delivered" }) && NSArray(array: atC).isEqual(to: atA) { break }
                usleep(100_000)
            }
            #expect(atC.count == sent.count && atC.allSatisfy { $0.str("status") == "delivered" && $0.int("attempts") == 1 })
            let madeByA = atC.filter { byId[$0.str("messageId") ?? ""]?.hasPrefix("a") == true }
            #expect(madeByA.count == 5)
            for d in madeByA {
                let history = d["history"] as? [[String: Any]] ?? []
                #expect(history.count == 1 && history.first?.int("status") == 204)
            }
            #expect(NSArray(array: atC).isEqual(to: atA))

            // Changed through node B, seen on node C.
            let patched = try c[1].rest().call("PATCH", "/v1/webhooks/\(id)", ["events": ["message.sent", "member.joined"]])
            #expect(patched.status == 200 && (patched.json.obj("endpoint")["events"] as? [String]) == ["message.sent", "member.joined"])
            try c.settle()
            #expect((try c[2].rest().call("GET", "/v1/webhooks/\(id)").json.obj("endpoint")["events"] as? [String]) == ["message.sent", "member.joined"])

            // A new secret through node C: a message sent by node B is signed with both.
            let rotated = try c[2].rest().call("POST", "/v1/webhooks/\(id)/rotate-secret")
            let newSecret = rotated.json.obj("endpoint").str("secret") ?? ""
            #expect(rotated.status == 200 && newSecret.hasPrefix("whsec_") && newSecret != secret)
            try c.settle()
            #expect(try c[1].rest().call("POST", "/v1/rooms/r/messages", ["content": "rotated", "fromUserId": "admin"]).status == 201)
            #expect(receiver.http.wait(timeout: 10) { $0.contains { r in receiver.all.contains { $0.content == "rotated" && $0.id == r.header("webhook-id") } } })
            if let r = receiver.http.requests.first(where: { r in receiver.all.contains { $0.content == "rotated" && $0.id == r.header("webhook-id") } }) {
                let timestamp = Int64(r.header("webhook-timestamp") ?? "") ?? 0
                #expect(r.header("webhook-signature") == StandardWebhooks.signature(id: r.header("webhook-id") ?? "", timestamp: timestamp, body: r.body,
                                                                                    secrets: [newSecret, secret]))
            }

            // A replay through node B sends the message again, with its id.
            let again = receiver.all.first { $0.content == "c0" }?.id ?? ""
            let replayed = try c[1].rest().call("POST", "/v1/webhooks/\(id)/replay", ["messageIds": [again]])
            #expect(replayed.status == 200 && replayed.json.int("queued") == 1, "\(replayed.text)")
            #expect(receiver.http.wait(timeout: 10) { _ in receiver.all.filter { $0.id == again }.count == 2 })

            // Deleted through node B: gone on node A.
            #expect(try c[1].rest().call("DELETE", "/v1/webhooks/\(id)").status == 200)
            try c.settle()
            let gone = try c[0].rest().call("GET", "/v1/webhooks/\(id)")
            #expect(gone.status == 404)
            let missing = try c[2].rest().call("PATCH", "/v1/webhooks/\(id)", ["enabled": false])
            #expect(missing.status == 404 && missing.json.str("field") == "id")
        }
    }

    // PX-4 on a cluster: a message pipelined right after a join on the same connection is judged
    // once the join has come back through the log, and sent, as on one node.
    @Test func beforeSendHookSeesAPipelinedJoin() async throws {
        try await offPool { () throws in
            let hook = try HTTPReceiver()
            defer { hook.stop() }
            let c = try TestCluster(database: "hook", extra: ["--webhook-allow-private", "testapp"])
            #expect(try c[0].rest().call("PATCH", "/v1/settings", ["beforeSend": ["url": hook.url(), "failOpen": false, "timeoutMs": 5000]]).status == 200)
            #expect(try c[0].rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            try c.settle()
            let bob = try c[2].client("bob")
            _ = try bob.expectOK(try bob.command("room.join", ["roomId": "r"]))
            let alice = try c[1].client("alice")
            try alice.ws.sendTexts([#"{"id":701,"op":"room.join","args":{"roomId":"r"}}"#,
                                    #"{"id":702,"op":"room.send","args":{"roomId":"r","content":"pipelined"}}"#])
            let got = try bob.waitFor("room.message", timeout: 10)
            #expect(got.obj("data").obj("message").str("content") == "pipelined")
            #expect(hook.requests.count == 1)
        }
    }
}
