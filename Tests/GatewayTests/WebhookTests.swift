import Crypto
import Foundation
import Testing
import TestKit
#if canImport(Glibc)
import Glibc
#endif

/// Webhooks end to end (SPEC §9): the real binary delivering to a receiver on loopback. The receiver
/// is a private target: the operator lets the test app reach it (`--webhook-allow-private`).
@Suite("Webhooks over real sockets", .serialized)
struct WebhookTests {
    static let allowPrivate = ["--webhook-allow-private", "testapp"]

    func hex(_ d: some Sequence<UInt8>) -> String { d.map { String(format: "%02x", $0) }.joined() }

    func createEndpoint(_ rest: RESTClient, _ body: [String: Any]) throws -> [String: Any] {
        let r = try rest.call("POST", "/v1/webhooks", body)
        #expect(r.status == 201, "create endpoint: \(r.text)")
        return r.json.obj("endpoint")
    }

    func deliveries(_ rest: RESTClient, _ id: String, _ query: String = "") throws -> [[String: Any]] {
        try rest.call("GET", "/v1/webhooks/\(id)/deliveries\(query)").json["deliveries"] as? [[String: Any]] ?? []
    }

    func verifyStandard(_ r: HTTPReceiver.Request, secret: String) -> Bool {
        guard let id = r.header("webhook-id"), let ts = r.header("webhook-timestamp"), let sigs = r.header("webhook-signature"),
              let key = Data(base64Encoded: String(secret.dropFirst("whsec_".count))) else { return false }
        let mac = HMAC<SHA256>.authenticationCode(for: Array("\(id).\(ts).".utf8) + r.body, using: SymmetricKey(data: key))
        return sigs.split(separator: " ").contains { $0 == "v1," + Data(mac).base64EncodedString() }
    }

    // PX-3: user.online when the first connection comes, user.offline once the last one has been
    // gone for the grace; a reconnect inside the grace sends nothing.
    @Test func onlineAndOfflineWebhooks() async throws {
        try await offPool { () throws in
            let receiver = try HTTPReceiver()
            defer { receiver.stop() }
            let data = temporaryDirectory("roomcast-presence")
            // A grace long enough for a restart and a reconnect on a loaded machine.
            let options = Self.allowPrivate + ["--presence-grace", "5"]
            var g = try GatewayProcess(dataDirectory: data, extra: options)
            defer { g.stop() }
            var rest = g.rest()
            _ = try createEndpoint(rest, ["url": receiver.url(), "allowPrivateNetwork": true, "events": ["user.online", "user.offline"]])
            // Delivery is at least once: a message the crash caught before its delivery was
            // recorded comes again with the same webhook-id. Each message counts once.
            func messages() -> [String] {
                var seen = Set<String>()
                return receiver.requests.compactMap { r -> String? in
                    guard let id = r.header("webhook-id"), seen.insert(id).inserted, let json = r.json as? [String: Any],
                          let type = json["type"] as? String else { return nil }
                    let users = (json["data"] as? [String: Any])?["userIds"] as? [String] ?? []
                    return type + " " + users.joined(separator: ",")
                }
            }
            func types() -> [String] { messages().map { String($0.split(separator: " ")[0]) } }
            let first = try ProtocolClient(port: g.port)
            try first.connect(token: try rest.token("alice", device: "phone"))
            #expect(receiver.wait { $0.count >= 1 })
            #expect(types() == ["user.online"])
            // Gone and back within the grace: nothing.
            try first.ws.close()
            usleep(200_000)
            let second = try ProtocolClient(port: g.port)
            try second.connect(token: try rest.token("alice", device: "laptop"))
            usleep(5_500_000)
            #expect(types() == ["user.online"])
            // Gone for good: offline, naming the last device.
            try second.ws.close()
            #expect(receiver.wait { $0.count >= 2 })
            #expect(types() == ["user.online", "user.offline"])
            let last = (receiver.requests.last?.json as? [String: Any])?["data"] as? [String: Any]
            #expect(last?["userIds"] as? [String] == ["alice"] && (last?["details"] as? [String: String])?["device"] == "laptop")

            // A crash cuts bob and carol: after the restart, carol is back within the grace (nothing
            // is sent for her), bob is not (his offline comes from the restarted server).
            let bob = try ProtocolClient(port: g.port), carol = try ProtocolClient(port: g.port)
            try bob.connect(token: try rest.token("bob"))
            try carol.connect(token: try rest.token("carol"))
            #expect(receiver.wait { _ in messages().count >= 4 })
            g.process.signal(SIGKILL)
            _ = g.process.waitForExit(timeout: 5)
            g = try GatewayProcess(dataDirectory: data, extra: options)
            rest = g.rest()
            let back = try ProtocolClient(port: g.port)
            try back.connect(token: try rest.token("carol"))
            #expect(receiver.wait { _ in messages().contains("user.offline bob") })
            usleep(1_000_000)
            #expect(Array(messages().dropFirst(4)) == ["user.offline bob"])
        }
    }

    // WH-1, WH-2, WH-3, WH-4
    @Test func signedDeliveriesWithAnAttemptLog() async throws {
        try await offPool { () throws in
            let receiver = try HTTPReceiver()
            defer { receiver.stop() }
            let g = try GatewayProcess(extra: Self.allowPrivate)
            defer { g.stop() }
            let rest = g.rest()
            // WH-5: a loopback target needs the allowance.
            let refused = try rest.call("POST", "/v1/webhooks", ["url": receiver.url()])
            #expect(refused.status == 400 && refused.json.str("field") == "url")
            let bad = try rest.call("POST", "/v1/webhooks", ["url": receiver.url(), "allowPrivateNetwork": true, "events": ["room.exploded"]])
            #expect(bad.status == 400 && bad.json.str("field") == "events")
            let e = try createEndpoint(rest, ["url": receiver.url(), "allowPrivateNetwork": true, "events": ["room.created", "member.joined", "message.sent"]])
            let secret = try #require(e.str("secret"))
            #expect(secret.hasPrefix("whsec_") && e.str("format") == "standard")
            let id = try #require(e.str("id"))

            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r1"]).status == 201)
            let c = try ProtocolClient(port: g.port)
            try c.connect(token: try rest.token("alice"))
            _ = try c.expectOK(try c.command("room.join", ["roomId": "r1"]))
            _ = try c.expectOK(try c.command("room.send", ["roomId": "r1", "content": "hello"]))
            // Not subscribed: a mute produces no delivery.
            #expect(try rest.call("POST", "/v1/rooms/r1/mutes", ["userIds": ["bob"], "minutes": 5]).status == 200)
            #expect(receiver.wait { $0.count >= 3 })
            usleep(300_000)
            let got = receiver.requests
            // First attempts leave in event order, but up to 32 at a time over separate connections,
            // so they may arrive in another order (README: receivers order by `time`). In `time`
            // order they are the three events as they happened, each once.
            let bodies = got.compactMap { $0.json as? [String: Any] }
            #expect(bodies.count == 3 && Set(bodies.compactMap { $0.str("type") }) == ["room.created", "member.joined", "message.sent"])
            let times = ["room.created", "member.joined", "message.sent"].map { t in bodies.first { $0.str("type") == t }?.obj("data").int("time") ?? -1 }
            #expect(times.allSatisfy { $0 > 0 } && times == times.sorted(), "event times \(times); arrived as \(bodies.map { $0.str("type") ?? "?" })")
            for r in got {
                #expect(verifyStandard(r, secret: secret))
                #expect(r.header("webhook-id")?.hasPrefix("msg_") == true)
                #expect(abs((Int64(r.header("webhook-timestamp") ?? "") ?? 0) - Int64(Date().timeIntervalSince1970)) < 60)
            }
            let joined = try #require(bodies.first { $0.str("type") == "member.joined" })
            #expect(joined.obj("data").str("roomId") == "r1" && (joined.obj("data")["userIds"] as? [String]) == ["alice"])
            // The delivery log: each delivered once, with its attempt.
            let log = try deliveries(rest, id)
            #expect(log.count == 3 && log.allSatisfy { $0.str("status") == "delivered" && $0.int("attempts") == 1 })
            #expect(((log.first?["history"] as? [[String: Any]])?.first)?.int("status") == 204)
            let metrics = try rest.call("GET", "/metrics", headers: []).text
            #expect(metrics.contains("roomcast_webhook_delivered_total 3"))
            // Nothing pending once all three are delivered; a single node owns every delivery.
            #expect(metrics.contains("\nroomcast_webhook_deliveries_owned 0\n") && metrics.contains("\nroomcast_webhook_deliveries_parked 0\n"))

            // WH-3 rotation: two signatures, each secret verifies on its own.
            let rotated = try rest.call("POST", "/v1/webhooks/\(id)/rotate-secret").json.obj("endpoint")
            let newSecret = try #require(rotated.str("secret"))
            #expect(newSecret != secret && rotated["rotating"] as? Bool == true)
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r2"]).status == 201)
            #expect(receiver.wait { $0.count >= 4 })
            let last = try #require(receiver.requests.last)
            #expect(last.header("webhook-signature")?.split(separator: " ").count == 2)
            #expect(verifyStandard(last, secret: secret) && verifyStandard(last, secret: newSecret))
        }
    }

    // WH-4
    @Test func failuresRetryThenDeadLetterThenReplay() async throws {
        try await offPool { () throws in
            let receiver = try HTTPReceiver { _ in .init(status: 503) }
            defer { receiver.stop() }
            let g = try GatewayProcess(extra: ["--webhook-retry-schedule", "100ms,200ms", "--webhook-timeout", "1"] + Self.allowPrivate)
            defer { g.stop() }
            let rest = g.rest()
            let id = try #require(try createEndpoint(rest, ["url": receiver.url(), "allowPrivateNetwork": true])["id"] as? String)
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "doomed"]).status == 201)
            // Three attempts (the first and two retries), then the dead-letter list.
            var dead: [[String: Any]] = []
            for _ in 0..<100 where dead.isEmpty {
                usleep(50_000)
                dead = try deliveries(rest, id, "?status=dead")
            }
            #expect(receiver.requests.count == 3)
            let d = try #require(dead.first)
            #expect(d.int("attempts") == 3 && d.int("lastStatus") == 503 && d.str("lastError")?.contains("retries exhausted") == true)
            let history = d["history"] as? [[String: Any]] ?? []
            #expect(history.map { $0.int("status") } == [503, 503, 503])
            #expect(history.map { $0.int("attempt") } == [1, 2, 3])
            #expect(receiver.requests.map { $0.header("webhook-id") }.allSatisfy { $0 == d.str("messageId") })

            // A timeout is retried like a 5xx.
            receiver.respond { _ in .init(status: 204, delay: 1.5) }
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "slow"]).status == 201)
            #expect(receiver.wait(timeout: 10) { $0.count >= 5 })
            let slow = try deliveries(rest, id).first { $0.str("status") != "dead" || $0.str("messageId") != d.str("messageId") }
            #expect(((slow?["history"] as? [[String: Any]])?.first)?.str("error")?.lowercased().contains("timeout") == true)

            // Replay the dead letter by id once the receiver recovers: same id, delivered.
            receiver.respond { _ in .init(status: 200) }
            let replay = try rest.call("POST", "/v1/webhooks/\(id)/replay", ["messageIds": [d.str("messageId") ?? ""]])
            #expect(replay.status == 200 && replay.json.int("queued") == 1)
            #expect(receiver.wait { rs in rs.contains { $0.header("webhook-id") == d.str("messageId") && rs.count >= 6 } })
            usleep(200_000)
            #expect(try deliveries(rest, id, "?status=dead").isEmpty)
            // Replay since a time: everything of the app since then that the endpoint wants (once
            // nothing is pending: pending deliveries are not queued twice).
            for _ in 0..<100 where try !deliveries(rest, id, "?status=pending").isEmpty { usleep(50_000) }
            let since = try rest.call("POST", "/v1/webhooks/\(id)/replay", ["since": 0])
            #expect(since.status == 200 && since.json.int("queued") == 2)
            let both = try rest.call("POST", "/v1/webhooks/\(id)/replay", ["since": 0, "messageIds": ["x"]])
            #expect(both.status == 400 && both.json.str("field") == "messageIds")
        }
    }

    // WH-4: 410 Gone disables the endpoint.
    @Test func goneDisablesTheEndpoint() async throws {
        try await offPool { () throws in
            let receiver = try HTTPReceiver { _ in .init(status: 410) }
            defer { receiver.stop() }
            let g = try GatewayProcess(extra: Self.allowPrivate)
            defer { g.stop() }
            let rest = g.rest()
            let id = try #require(try createEndpoint(rest, ["url": receiver.url(), "allowPrivateNetwork": true])["id"] as? String)
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "a"]).status == 201)
            #expect(receiver.wait { $0.count == 1 })
            var endpoint: [String: Any] = [:]
            for _ in 0..<50 {
                endpoint = try rest.call("GET", "/v1/webhooks/\(id)").json.obj("endpoint")
                if endpoint["enabled"] as? Bool == false { break }
                usleep(50_000)
            }
            #expect(endpoint["enabled"] as? Bool == false && endpoint.str("disabledReason")?.contains("410") == true)
            #expect(try deliveries(rest, id, "?status=dead").first?.int("lastStatus") == 410)
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "b"]).status == 201)
            usleep(400_000)
            #expect(receiver.requests.count == 1)
            // Enabled again, it receives new messages.
            receiver.respond { _ in .init(status: 204) }
            #expect(try rest.call("PATCH", "/v1/webhooks/\(id)", ["enabled": true]).json.obj("endpoint")["enabled"] as? Bool == true)
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "c"]).status == 201)
            #expect(receiver.wait { $0.count == 2 })
        }
    }

    // WH-5: a name that resolves to loopback is refused when connecting.
    @Test func privateTargetsBehindNamesAreRefused() async throws {
        try await offPool { () throws in
            let receiver = try HTTPReceiver()
            defer { receiver.stop() }
            let g = try GatewayProcess(extra: ["--webhook-retry-schedule", "50ms"] + Self.allowPrivate)
            defer { g.stop() }
            let rest = g.rest()
            let id = try #require(try createEndpoint(rest, ["url": "http://localhost:\(receiver.port)/hook"])["id"] as? String)
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "x"]).status == 201)
            var dead: [[String: Any]] = []
            for _ in 0..<60 where dead.isEmpty {
                usleep(50_000)
                dead = try deliveries(rest, id, "?status=dead")
            }
            #expect(dead.first?.str("lastError")?.contains("refused") == true)
            #expect(receiver.requests.isEmpty)
            // Redirects are not followed.
            receiver.respond { _ in .init(status: 302) }
            let allowed = try #require(try createEndpoint(rest, ["url": receiver.url(), "allowPrivateNetwork": true])["id"] as? String)
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "y"]).status == 201)
            #expect(receiver.wait { $0.count >= 2 })
            usleep(300_000)
            #expect(receiver.requests.allSatisfy { $0.target == "/hook" })
            #expect(try deliveries(rest, allowed).first?.int("lastStatus") == 302)
        }
    }

    // WH-5: private targets are the operator's decision. An app the operator did not list cannot
    // grant itself allowPrivateNetwork (403, 40301, on that field); and the guard holds per
    // transfer: the other app's endpoint to the same host and port is refused even while the listed
    // app's connection to it is open, and never reaches the receiver.
    @Test func privateTargetsAreTheOperatorsDecision() async throws {
        try await offPool { () throws in
            let receiver = try HTTPReceiver()
            defer { receiver.stop() }
            let g = try GatewayProcess(extra: ["--app", "other:other-secret-123", "--webhook-retry-schedule", "50ms"] + Self.allowPrivate)
            defer { g.stop() }
            let rest = g.rest()
            let other = RESTClient(port: g.port, appKey: "other", secret: "other-secret-123")
            let named = "http://localhost:\(receiver.port)"
            for body: [String: Any] in [["url": receiver.url(), "allowPrivateNetwork": true], ["url": named + "/b", "allowPrivateNetwork": true]] {
                let refused = try other.call("POST", "/v1/webhooks", body)
                #expect(refused.status == 403 && refused.json.int("code") == 40301 && refused.json.str("field") == "allowPrivateNetwork", "\(refused.text)")
            }
            let allowed = try createEndpoint(rest, ["url": named + "/a", "allowPrivateNetwork": true])
            #expect(allowed["allowPrivateNetwork"] as? Bool == true)
            let guarded = try createEndpoint(other, ["url": named + "/b"])
            #expect(guarded["allowPrivateNetwork"] as? Bool == false)
            let patched = try other.call("PATCH", "/v1/webhooks/\(guarded.str("id") ?? "")", ["allowPrivateNetwork": true])
            #expect(patched.status == 403 && patched.json.str("field") == "allowPrivateNetwork")

            // The listed app's delivery leaves its connection open; the other app's is refused on it.
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "a1"]).status == 201)
            #expect(receiver.wait { $0.count == 1 })
            #expect(try other.call("POST", "/v1/rooms", ["roomId": "b1"]).status == 201)
            var dead: [[String: Any]] = []
            for _ in 0..<100 where dead.isEmpty {
                usleep(50_000)
                dead = try deliveries(other, guarded.str("id") ?? "", "?status=dead")
            }
            #expect(dead.first?.str("lastError")?.contains("refused") == true, "\(dead)")
            #expect(receiver.requests.allSatisfy { $0.target == "/a" })
        }
    }

    // WH-3: the RongCloud and NIM formats, with their signatures.
    // (Endpoints of the command line may reach private targets without --webhook-allow-private.)
    @Test func vendorFormats() async throws {
        try await offPool { () throws in
            let receiver = try HTTPReceiver()
            defer { receiver.stop() }
            let g = try GatewayProcess(extra: ["--webhook", "testapp \(receiver.url("/rc")) format=rongcloud allow-private",
                                               "--webhook", "testapp \(receiver.url("/nim")) format=nim allow-private events=room.created"])
            defer { g.stop() }
            let rest = g.rest()
            #expect(try rest.call("GET", "/v1/webhooks").json["endpoints"].map { ($0 as? [Any])?.count } == 2)
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "vr"]).status == 201)
            #expect(try rest.call("POST", "/v1/rooms/vr/messages", ["content": "not for rongcloud"]).status == 201)
            #expect(try rest.call("DELETE", "/v1/rooms/vr").status == 200)
            #expect(receiver.wait { $0.count >= 3 })
            usleep(300_000)
            let rc = receiver.requests.filter { $0.target.hasPrefix("/rc") }
            let nim = receiver.requests.filter { $0.target.hasPrefix("/nim") }
            // RongCloud: create (type 0) and destroy (type 3) only; signature in the query. (First
            // attempts leave in order but may arrive in another; the README says receivers order by time.)
            #expect(rc.compactMap { (($0.json as? [[String: Any]])?.first)?.int("type") }.sorted() == [0, 3])
            #expect((rc.first?.json as? [[String: Any]])?.first?.str("chatRoomId") == "vr")
            for r in rc {
                let q = r.query
                let sig = hex(Insecure.SHA1.hash(data: Array(("test-secret-123456" + (q["nonce"] ?? "") + (q["timestamp"] ?? "")).utf8)))
                #expect(q["appKey"] == "testapp" && q["signature"] == sig)
            }
            // NIM: only room.created (its filter); MD5 and CheckSum over the body.
            #expect(nim.count == 1)
            if let r = nim.first {
                let md5 = hex(Insecure.MD5.hash(data: r.body))
                #expect(r.header("MD5") == md5)
                #expect(r.header("CheckSum") == hex(Insecure.SHA1.hash(data: Array(("test-secret-123456" + md5 + (r.header("CurTime") ?? "")).utf8))))
                #expect((r.json as? [String: Any])?.str("eventType") == "room.created")
            }
        }
    }

    // WH-4: kill -9 during deliveries; after the restart the receiver ends with every message.
    @Test func killNineDuringDeliveriesLosesNothing() async throws {
        try await offPool { () throws in
            // 50 ms an answer, two at a time: the 150 messages need at least 3.75 s, so the kill
            // (after the 20th) finds most of them pending however slowly the rooms are made
            // (with 10 ms they could all be delivered first on a loaded machine).
            let receiver = try HTTPReceiver { _ in .init(status: 204, delay: 0.05) }
            defer { receiver.stop() }
            let data = temporaryDirectory("roomcast-webhook-kill9")
            var g = try GatewayProcess(dataDirectory: data, extra: ["--webhook-concurrency", "2"] + Self.allowPrivate)
            defer { g.stop() }
            let rest = g.rest()
            _ = try createEndpoint(rest, ["url": receiver.url(), "allowPrivateNetwork": true, "events": ["room.created"]])
            let total = 150
            for i in 0..<total { #expect(try rest.call("POST", "/v1/rooms", ["roomId": "k\(i)"]).status == 201) }
            // Kill while deliveries are in flight (acknowledged rooms, not all delivered yet).
            #expect(receiver.wait { $0.count >= 20 })
            let before = Set(receiver.requests.compactMap { $0.header("webhook-id") }).count
            g.process.signal(SIGKILL)
            _ = g.process.waitForExit(timeout: 5)
            #expect(before < total)
            g = try GatewayProcess(dataDirectory: data, extra: ["--webhook-concurrency", "8"] + Self.allowPrivate)
            #expect(receiver.wait(timeout: 30) { Set($0.compactMap { $0.header("webhook-id") }).count >= total })
            let byId = Dictionary(grouping: receiver.requests, by: { $0.header("webhook-id") ?? "" })
            #expect(byId.count == total)
            let rooms = Set(receiver.requests.compactMap { (($0.json as? [String: Any])?["data"] as? [String: Any])?["roomId"] as? String })
            #expect(rooms.count == total)
            // A duplicate carries the same id and body.
            for (_, copies) in byId where copies.count > 1 { #expect(Set(copies.map(\.body)).count == 1) }
        }
    }
}
