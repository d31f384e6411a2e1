import Crypto
import Foundation
import Testing
import TestKit
@testable import Gateway
import Wire

/// Signatures and tokens through the REST API and the WebSocket protocol, in-process: the real
/// routes, authenticator and sessions on a manual clock, so stale timestamps, nonce reuse and
/// token expiry are tested without sleeping. (The Origin allowlist through a real WebSocket
/// upgrade is SmokeTests'.)
@Suite("Authentication in-process (SPEC §2)")
struct AuthTests {
    func hexSHA1(_ s: String) -> String { Insecure.SHA1.hash(data: Array(s.utf8)).map { String(format: "%02x", $0) }.joined() }

    @Test func restSignatureSchemes() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        let now = g.clock.seconds
        // RongCloud headers, seconds and milliseconds, and the RC- prefix.
        #expect(try rest.call("GET", "/v1/global-mutes", headers: rest.signatureHeaders(nonce: "n1", timestamp: now)).status == 200)
        #expect(try rest.call("GET", "/v1/global-mutes", headers: rest.signatureHeaders(nonce: "n2", timestamp: now * 1000)).status == 200)
        let rc = rest.signatureHeaders(nonce: "n3", timestamp: now).map { ("RC-" + $0.0, $0.1) }
        #expect(try rest.call("GET", "/v1/global-mutes", headers: rc).status == 200)
        // NIM headers.
        let nim = [("AppKey", g.appKey), ("Nonce", "n4"), ("CurTime", String(now)), ("CheckSum", hexSHA1(g.secret + "n4" + String(now)))]
        #expect(try rest.call("GET", "/v1/global-mutes", headers: nim).status == 200)
        // The native HMAC-SHA256 scheme signs method, target and body.
        let body = Array("{\"roomId\":\"signed\"}".utf8)
        let bodyHash = SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined()
        let canonical = "POST\n/v1/rooms\n\(now)\nn5\n\(bodyHash)"
        let sig = HMAC<SHA256>.authenticationCode(for: Array(canonical.utf8), using: SymmetricKey(data: Array(g.secret.utf8)))
            .map { String(format: "%02x", $0) }.joined()
        let native = [("X-Roomcast-Key", g.appKey), ("X-Roomcast-Timestamp", String(now)), ("X-Roomcast-Nonce", "n5"), ("X-Roomcast-Signature", sig)]
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "signed"], headers: native).status == 201)
        // The same signature on another body is refused.
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "tampered"], headers: [("X-Roomcast-Key", g.appKey), ("X-Roomcast-Timestamp", String(now)),
                                                                                   ("X-Roomcast-Nonce", "n6"), ("X-Roomcast-Signature", sig)]).json.int("code") == 1004)
    }

    @Test func refusalsAre401WithACode() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        let now = g.clock.seconds
        func code(_ headers: [(String, String)]) throws -> (Int, Int?) {
            let r = try rest.call("GET", "/v1/global-mutes", headers: headers)
            return (r.status, r.json.int("code"))
        }
        #expect(try code([]) == (401, 40100))
        var bad = rest.signatureHeaders(nonce: "x1", timestamp: now)
        bad[3].1 = String(repeating: "0", count: 40)
        #expect(try code(bad) == (401, 1004))
        #expect(try code(rest.signatureHeaders(nonce: "x2", timestamp: now - 301)) == (401, 40103))
        #expect(try code(rest.signatureHeaders(nonce: "x3", timestamp: now + 301)) == (401, 40103))
        var unknown = rest.signatureHeaders(nonce: "x4", timestamp: now)
        unknown[0].1 = "nobody"
        #expect(try code(unknown) == (401, 1001))
        // A nonce may be used once.
        let once = rest.signatureHeaders(nonce: "replay", timestamp: now)
        #expect(try code(once).0 == 200)
        #expect(try code(once) == (401, 40104))
        // Unsigned requests change nothing.
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "x"], headers: []).status == 401)
        #expect(try rest.call("GET", "/v1/rooms/x").status == 404)
    }

    @Test func clientTokens() throws {
        let g = try InProcessGateway { $0.tokenGraceSeconds = 1 }
        defer { g.stop() }
        let rest = g.rest()
        // A token minted by the app server itself (same secret, HS256) is accepted.
        let own = ClientToken.mint(TokenClaims(sub: "selfmade", app: g.appKey, exp: g.clock.seconds + 60), secret: g.secret)
        let c = g.session()
        #expect(try c.connect(token: own).str("userId") == "selfmade")

        // alg=none and a wrong key are refused with 4004.
        let header = base64URL(Array(#"{"alg":"none","typ":"JWT"}"#.utf8))
        let payload = base64URL(Array(#"{"sub":"mallory","app":"testapp","exp":9999999999}"#.utf8))
        for token in [header + "." + payload + ".", ClientToken.mint(TokenClaims(sub: "m", app: g.appKey, exp: 9_999_999_999), secret: "wrong-secret")] {
            let bad = g.session()
            #expect(throws: (any Error).self) { try bad.connect(token: token) }
            #expect(bad.closeCode == 4004)
        }

        // A correctly signed token with an absurd expiry is refused, and the server keeps serving.
        let absurd = g.session()
        let reply = try absurd.command("connect", ["token": ClientToken.mint(TokenClaims(sub: "m", app: g.appKey, exp: Int64.max), secret: g.secret)])
        #expect(reply.obj("error").int("code") == 40105 && reply.obj("error").str("field") == "token")
        #expect(try rest.call("GET", "/healthz", headers: []).status == 200)

        // The first message must be connect.
        let rude = g.session()
        #expect(throws: (any Error).self) { _ = try rude.command("room.join", ["roomId": "x"]) }
        #expect(rude.closeCode == 4001)

        // An expiring token: notice, refresh accepted; then expiry without refresh closes with
        // 4002 once the grace (1 s here) is over. The clock moves by hand.
        let short = g.session()
        try short.connect(token: try rest.token("shorty", ttl: 1))
        #expect(!short.eventNames().contains("token.expired"))
        g.advance(seconds: 1)
        try short.waitFor("token.expired")
        _ = try short.expectOK(try short.command("token.refresh", ["token": try rest.token("shorty", ttl: 2)]))
        g.advance(seconds: 1)
        #expect(!short.eventNames().contains("token.expired"))
        g.advance(seconds: 1)
        try short.waitFor("token.expired")
        #expect(short.closeCode == nil)
        g.advance(seconds: 1)
        #expect(throws: (any Error).self) { _ = try short.waitFor("never") }
        #expect(short.closeCode == 4002)
    }

    // NIM-3: anonymous members receive but cannot send.
    @Test func anonymousIndependentMode() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "live"]).status == 201)
        let anon = g.session()
        let noNick = try anon.command("connect", ["appKey": g.appKey, "anonymous": ["avatar": "a.png"]])
        #expect(noNick.obj("error").str("field") == "anonymous.nickname")
        let ok = try anon.expectOK(try anon.command("connect", ["appKey": g.appKey, "anonymous": ["nickname": "Guest", "avatar": "g.png"]]))
        #expect(ok["anonymous"] as? Bool == true)
        #expect(ok.str("userId")?.hasPrefix("anon-") == true)
        _ = try anon.expectOK(try anon.command("room.join", ["roomId": "live"]))
        #expect(try anon.command("room.send", ["roomId": "live", "content": "hi"]).obj("error").int("code") == 40302)
        #expect(try rest.call("POST", "/v1/rooms/live/messages", ["content": "broadcast"]).status == 201)
        #expect(try anon.waitFor("room.message").obj("data").obj("message").str("content") == "broadcast")
        // Address lookup hands out this node's WebSocket URL.
        let addr = try rest.call("GET", "/v1/rooms/live/address?userId=u1&clientType=web&clientIp=10.0.0.1")
        #expect((addr.json["addresses"] as? [String])?.first?.hasSuffix("/ws") == true)
        #expect(try rest.call("GET", "/v1/rooms/nowhere/address?userId=u1").status == 404)
    }
}
