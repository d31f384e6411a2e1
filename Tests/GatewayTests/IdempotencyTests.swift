import Chat
import Foundation
@testable import Gateway
import HTTP1
import Server
import Synchronization
import Testing
import TestKit
import Wire
#if canImport(Glibc)
import Glibc
#endif

/// PX-2: a write sent with an Idempotency-Key is made once; a retry gets the first answer again
/// (also after kill -9); the same key with another request is refused; keys are per app.
@Suite("Idempotent writes (PX-2)")
struct IdempotencyTests {
    @Test func everyKindOfWriteRetriedIsAppliedOnce() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        func keyed(_ key: String) -> [(String, String)] { rest.signatureHeaders() + [("Idempotency-Key", key)] }
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "seed"]).status == 201)
        let writes: [(String, String, Any?)] = [
            ("POST", "/v1/rooms", ["roomId": "a"]),
            ("PATCH", "/v1/rooms/a", ["name": "Renamed"]),
            ("PUT", "/v1/rooms/a/members/bob/role", ["role": "manager"]),
            ("POST", "/v1/rooms/a/mutes", ["userIds": ["x"], "minutes": 5]),
            ("POST", "/v1/rooms/a/blocks", ["userIds": ["y"], "minutes": 5]),
            ("PUT", "/v1/rooms/a/attributes", ["entries": ["k": "v"]]),
            ("PUT", "/v1/rooms/a/queue/seat", ["value": "v"]),
            ("POST", "/v1/rooms/a/messages", ["content": "only once"]),
            ("POST", "/v1/global-mutes", ["userIds": ["z"], "minutes": 5]),
            ("POST", "/v1/webhooks", ["url": "https://example.com/hook"]),
            ("PATCH", "/v1/settings", ["maxRooms": 500]),
            ("POST", "/v1/users/u1/tokens", ["ttlSeconds": 60]),
            ("DELETE", "/v1/rooms/seed", nil),
        ]
        for (i, (method, path, body)) in writes.enumerated() {
            // A retry sends the same bytes (a dictionary serialized twice may not keep its key order).
            let bytes = try body.map { Array(try JSONSerialization.data(withJSONObject: $0, options: .sortedKeys)) } ?? []
            let first = try rest.call(method, path, bytes: bytes, headers: keyed("key-\(i)"))
            #expect(first.status < 300, "\(method) \(path): \(first.text)")
            #expect(first.header("Idempotent-Replayed") == nil)
            g.advance(seconds: 1)
            let again = try rest.call(method, path, bytes: bytes, headers: keyed("key-\(i)"))
            #expect(again.status == first.status && again.body == first.body, "\(method) \(path): \(again.text)")
            #expect(again.header("Idempotent-Replayed") == "true")
        }
        // Applied once: one message, one webhook endpoint; and without a key the create is refused.
        #expect((try rest.call("GET", "/v1/rooms/a/messages").json["messages"] as? [Any])?.count == 1)
        #expect((try rest.call("GET", "/v1/webhooks").json["endpoints"] as? [Any])?.count == 1)
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "a"]).status == 409)

        // The same key with another request: 422, 42200, nothing made.
        let other = try rest.call("POST", "/v1/rooms", ["roomId": "b"], headers: keyed("key-0"))
        #expect(other.status == 422 && other.json.int("code") == 42200 && other.json.str("field") == "Idempotency-Key")
        #expect(try rest.call("GET", "/v1/rooms/b").status == 404)
        // Bad keys are named.
        for bad in [String(repeating: "k", count: 256), "has space"] {
            let r = try rest.call("POST", "/v1/rooms", ["roomId": "c"], headers: keyed(bad))
            #expect(r.status == 400 && r.json.str("field") == "Idempotency-Key")
        }
        // Keys are per app: another app's key-0 is its own.
        let otherApp = g.rest(app: InProcessGateway.otherApp.key, secret: InProcessGateway.otherApp.secret)
        let theirs = try otherApp.call("POST", "/v1/rooms", ["roomId": "b"], headers: otherApp.signatureHeaders() + [("Idempotency-Key", "key-0")])
        #expect(theirs.status == 201 && theirs.header("Idempotent-Replayed") == nil)
        // Reads are not affected by a key.
        #expect(try rest.call("GET", "/v1/rooms/a", headers: keyed("key-0")).status == 200)
        // After 24 hours the key is new again.
        g.advance(seconds: 24 * 3600 + 10)
        let later = try rest.call("POST", "/v1/rooms", ["roomId": "later"], headers: keyed("key-0"))
        #expect(later.status == 201 && later.header("Idempotent-Replayed") == nil)
    }

    @Test func vendorSurfacesReplayToo() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        let rcHeaders = rest.signatureHeaders() + [("Idempotency-Key", "rc-1")]
        let first = try rest.vendor(.rongCloud, "/chatroom/create_new.json", [("chatroomId", "vr")], headers: rcHeaders)
        let again = try rest.vendor(.rongCloud, "/chatroom/create_new.json", [("chatroomId", "vr")], headers: rest.signatureHeaders() + [("Idempotency-Key", "rc-1")])
        #expect(first.json.int("code") == 200 && again.body == first.body && again.header("Idempotent-Replayed") == "true")
        // Nexconn's SDK sends X-Request-ID.
        let nx: [String: Any] = ["channelId": "nx"]
        let n1 = try rest.vendor(.nexconn, "/v4/open-channel/create", json: nx, headers: rest.signatureHeaders() + [("X-Request-ID", "req-1")])
        let n2 = try rest.vendor(.nexconn, "/v4/open-channel/create", json: nx, headers: rest.signatureHeaders() + [("X-Request-ID", "req-1")])
        #expect(n1.json.int("code") == 0 && n2.body == n1.body && n2.header("Idempotent-Replayed") == "true")
    }

    @Test func theAnswerSurvivesKillNine() async throws {
        try await offPool { () throws in
            let data = temporaryDirectory("roomcast-idem")
            var g = try GatewayProcess(dataDirectory: data)
            let rest = g.rest()
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r", "keepAlive": true]).status == 201)
            let first = try rest.call("POST", "/v1/rooms/r/messages", ["content": "once"], headers: rest.signatureHeaders() + [("Idempotency-Key", "durable-1")])
            #expect(first.status == 201)
            g.process.signal(SIGKILL)
            _ = g.process.waitForExit(timeout: 5)
            g = try GatewayProcess(dataDirectory: data)
            defer { g.stop() }
            let after = g.rest()
            let again = try after.call("POST", "/v1/rooms/r/messages", ["content": "once"], headers: after.signatureHeaders() + [("Idempotency-Key", "durable-1")])
            #expect(again.status == 201 && again.body == first.body && again.header("Idempotent-Replayed") == "true")
            #expect((try after.call("GET", "/v1/rooms/r/messages").json["messages"] as? [Any])?.count == 1)
        }
    }

    // PX-2: answers that say "try again" are never kept — by status, and by Retry-After (NIM
    // answers its storage, rate-limit and moderation refusals with HTTP 200).
    @Test func tryAgainAnswersAreNotKept() {
        func response(_ status: Int, retryAfter: Bool = false) -> Response {
            var r = Response.json(HTTPStatus(code: status), "{}")
            if retryAfter { r.headers.add("Retry-After", "1") }
            return r
        }
        #expect(AnswerKeeper.isKeepable(response(200)) && AnswerKeeper.isKeepable(response(201)) && AnswerKeeper.isKeepable(response(404)))
        #expect(!AnswerKeeper.isKeepable(response(200, retryAfter: true)))
        #expect(!AnswerKeeper.isKeepable(response(429)) && !AnswerKeeper.isKeepable(response(503)) && !AnswerKeeper.isKeepable(response(500)))
        let keeper = AnswerKeeper(app: "a", key: "k", fingerprint: "f", trim: false, clock: { 0 })
        #expect(keeper.keep(response(200, retryAfter: true)) == nil && keeper.keptResponse == nil)
        #expect(keeper.keep(response(200)) != nil && keeper.keptResponse?.status.code == 200)
    }

    // PX-2: a keyed call that makes one change keeps its answer in that change's own commit (one
    // commit, not two), on the native and the vendor surfaces and under the before-send hook's
    // path; a call that makes several changes keeps it in a commit after them.
    @Test func theAnswerIsKeptInTheChangesOwnCommit() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        let store = g.core.store
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        func commits(_ call: () throws -> RESTClient.Response) rethrows -> (Int, RESTClient.Response) {
            g.settle()
            let before = store.commitsCommitted.load(ordering: .relaxed)
            let r = try call()
            g.settle()
            // settle()'s commits write nothing (not counted); the signed call records its nonce.
            return (store.commitsCommitted.load(ordering: .relaxed) - before - 1, r)
        }
        let (plain, _) = try commits { try rest.call("POST", "/v1/rooms/r/messages", ["content": "plain"]) }
        let (keyed, first) = try commits { try rest.call("POST", "/v1/rooms/r/messages", ["content": "keyed"], headers: rest.signatureHeaders() + [("Idempotency-Key", "one-commit")]) }
        #expect(plain == 1 && keyed == 1 && first.status == 201)
        let (refused, missing) = try commits { try rest.call("POST", "/v1/rooms/nope/messages", ["content": "x"], headers: rest.signatureHeaders() + [("Idempotency-Key", "refusal")]) }
        #expect(refused == 1 && missing.status == 404)
        let (vendor, v) = try commits {
            try rest.vendor(.rongCloud, "/chatroom/create_new.json", [("chatroomId", "rc")], headers: rest.signatureHeaders() + [("Idempotency-Key", "rc-1")])
        }
        #expect(vendor == 1 && v.json.int("code") == 200)
        // Each replays without a commit.
        let (replay, again) = try commits { try rest.call("POST", "/v1/rooms/r/messages", ["content": "keyed"], headers: rest.signatureHeaders() + [("Idempotency-Key", "one-commit")]) }
        #expect(replay == 0 && again.body == first.body && again.header("Idempotent-Replayed") == "true")
        let (replayed404, gone) = try commits { try rest.call("POST", "/v1/rooms/nope/messages", ["content": "x"], headers: rest.signatureHeaders() + [("Idempotency-Key", "refusal")]) }
        #expect(replayed404 == 0 && gone.body == missing.body)
    }

    // PX-2: the answer is kept in the same transaction as the change it answers, so kill -9 at
    // any moment leaves both or neither: eight writers send keyed messages until the server is
    // killed mid-stream; after the restart every key is retried with the same bytes and every
    // message is in its room exactly once (a change made without its kept answer would be made
    // again by the retry and show twice).
    @Test func killNineMidStreamNeverAppliesARetryTwice() async throws {
        try await offPool { () throws in
            let data = temporaryDirectory("roomcast-idem-crash")
            var g = try GatewayProcess(dataDirectory: data)
            let rest = g.rest()
            let writers = 8, perWriter = 60
            for w in 0..<writers { #expect(try rest.call("POST", "/v1/rooms", ["roomId": "w\(w)", "keepAlive": true]).status == 201) }
            let answered = Atomic<Int>(0)
            let attempted = Mutex<[[Int]]>(Array(repeating: [], count: writers))
            let group = DispatchGroup()
            let (port, appKey, secret) = (g.port, g.appKey, g.secret)
            for w in 0..<writers {
                DispatchQueue.global().async(group: group) {
                    let rest = RESTClient(port: port, appKey: appKey, secret: secret)
                    for i in 0..<perWriter {
                        attempted.withLock { $0[w].append(i) }
                        let r = try? rest.call("POST", "/v1/rooms/w\(w)/messages", ["content": "m\(i)"],
                                               headers: rest.signatureHeaders() + [("Idempotency-Key", "w\(w)-\(i)")])
                        guard r?.status == 201 else { return }
                        answered.add(1, ordering: .relaxed)
                    }
                }
            }
            // Kill while the writers are busy (a third of the way in).
            let deadline = Date().addingTimeInterval(20)
            while answered.load(ordering: .relaxed) < writers * perWriter / 3 && Date() < deadline { usleep(2_000) }
            g.process.signal(SIGKILL)
            _ = g.process.waitForExit(timeout: 5)
            group.wait()
            #expect(answered.load(ordering: .relaxed) < writers * perWriter)
            g = try GatewayProcess(dataDirectory: data)
            defer { g.stop() }
            let after = g.rest()
            for (w, sent) in attempted.withLock({ $0 }).enumerated() {
                for i in sent {
                    let r = try after.call("POST", "/v1/rooms/w\(w)/messages", ["content": "m\(i)"],
                                           headers: after.signatureHeaders() + [("Idempotency-Key", "w\(w)-\(i)")])
                    #expect(r.status == 201)
                }
                let history = try after.call("GET", "/v1/rooms/w\(w)/messages?limit=100&order=asc").json["messages"] as? [[String: Any]] ?? []
                let contents = history.compactMap { $0.str("content") }
                #expect(contents == sent.map { "m\($0)" }, "room w\(w)")
            }
        }
    }
}
