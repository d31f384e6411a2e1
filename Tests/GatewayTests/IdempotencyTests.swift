import Chat
import Foundation
@testable import Gateway
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
}
