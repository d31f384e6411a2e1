import Chat
import Crypto
import Foundation
import Testing
@testable import Webhooks

@Suite("Webhook signing, egress and retry policy (SPEC §9)")
struct WebhookPolicyTests {
    // WH-3: the Standard Webhooks specification's own test vector.
    @Test func standardWebhooksSignatureMatchesTheSpecVector() {
        let sig = StandardWebhooks.signature(id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330,
                                             body: Array(#"{"test": 2432232314}"#.utf8), secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"])
        #expect(sig == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    }

    // WH-3: during a rotation both secrets sign.
    @Test func rotationSignsWithBothSecrets() {
        let now: Int64 = 1_000_000
        var e = WebhookEndpoint(id: "ep", app: "a", url: "https://example.com/h", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", events: [],
                                format: .standard, allowPrivateNetwork: false, origin: "api", createdAt: 0)
        e.previousSecret = StandardWebhooks.makeSecret { 7 }
        e.previousSecretExpiresAt = now + 10
        #expect(e.signingSecrets(now: now).count == 2)
        #expect(e.signingSecrets(now: now + 10).count == 1)
        let header = StandardWebhooks.signature(id: "m", timestamp: 1, body: [1], secrets: e.signingSecrets(now: now))
        #expect(header.split(separator: " ").count == 2 && header.split(separator: " ").allSatisfy { $0.hasPrefix("v1,") })
        #expect(StandardWebhooks.isValidSecret(StandardWebhooks.makeSecret { UInt8.random(in: 0...255) }))
        #expect(!StandardWebhooks.isValidSecret("whsec_short"))
        #expect(!StandardWebhooks.isValidSecret("not base64 !"))
    }

    // WH-3: RongCloud query signature and NIM copy headers, recomputed independently.
    @Test func vendorSignatures() {
        let q = RongCloudCallback.query(appKey: "key", appSecret: "secret", nonce: "14314", timestamp: 1_408_710_653_491)
        let expected = Insecure.SHA1.hash(data: Array("secret143141408710653491".utf8)).map { String(format: "%02x", $0) }.joined()
        #expect(q == "appKey=key&timestamp=1408710653491&nonce=14314&signature=\(expected)")
        let body = Array(#"{"eventType":"member.joined"}"#.utf8)
        let h = Dictionary(uniqueKeysWithValues: NIMCallback.headers(appKey: "k", appSecret: "s", body: body, curTime: 1_440_570_500_855))
        let md5 = Insecure.MD5.hash(data: body).map { String(format: "%02x", $0) }.joined()
        #expect(h["MD5"] == md5)
        #expect(h["CurTime"] == "1440570500855")
        #expect(h["CheckSum"] == Insecure.SHA1.hash(data: Array("s\(md5)1440570500855".utf8)).map { String(format: "%02x", $0) }.joined())
    }

    // WH-5
    @Test func addressesAreClassified() {
        func v4(_ s: String) -> AddressClass? { EgressPolicy.classify(literal: s) }
        #expect(v4("8.8.8.8") == .global)
        #expect(v4("127.0.0.1") == .loopback)
        #expect(v4("10.1.2.3") == .privateNetwork && v4("172.16.0.1") == .privateNetwork && v4("172.31.255.255") == .privateNetwork)
        #expect(v4("172.32.0.1") == .global)
        #expect(v4("192.168.1.1") == .privateNetwork && v4("100.64.0.1") == .privateNetwork)
        #expect(v4("169.254.169.254") == .linkLocal)
        #expect(v4("0.0.0.0") == .unspecified)
        #expect(v4("224.0.0.1") == .multicast)
        #expect(v4("192.0.2.10") == .reserved && v4("198.18.0.1") == .reserved && v4("255.255.255.255") == .reserved)
        #expect(v4("::1") == .loopback && v4("[::1]") == .loopback && v4("::") == .unspecified)
        #expect(v4("fd00:ec2::254") == .privateNetwork && v4("fe80::1") == .linkLocal && v4("ff02::1") == .multicast)
        #expect(v4("::ffff:127.0.0.1") == .loopback && v4("::ffff:8.8.8.8") == .global && v4("64:ff9b::a9fe:a9fe") == .linkLocal)
        #expect(v4("2001:db8::1") == .reserved && v4("2606:4700::1111") == .global)
        #expect(v4("example.com") == nil)
        #expect(!EgressPolicy.allows(.loopback, allowPrivate: false) && EgressPolicy.allows(.loopback, allowPrivate: true))
        #expect(!EgressPolicy.allows(.multicast, allowPrivate: true) && EgressPolicy.allows(.global, allowPrivate: false))
    }

    // WH-5
    @Test func urlsAreValidated() throws {
        #expect(throws: WebhookURL.Problem.scheme) { _ = try WebhookURL("ftp://example.com/x", allowPrivate: false) }
        #expect(throws: WebhookURL.Problem.credentials) { _ = try WebhookURL("https://u:p@example.com/x", allowPrivate: false) }
        #expect(throws: WebhookURL.Problem.malformed) { _ = try WebhookURL("not a url", allowPrivate: false) }
        #expect(throws: WebhookURL.Problem.privateTarget(.loopback)) { _ = try WebhookURL("http://127.0.0.1:9000/h", allowPrivate: false) }
        #expect(throws: WebhookURL.Problem.privateTarget(.linkLocal)) { _ = try WebhookURL("http://169.254.169.254/latest", allowPrivate: false) }
        #expect(try WebhookURL("http://127.0.0.1:9000/h", allowPrivate: true).host == "127.0.0.1")
        // A name is checked when curl connects (after resolution), not here.
        #expect(try WebhookURL("https://hooks.example.com/in", allowPrivate: false).host == "hooks.example.com")
    }

    // WH-4: the schedule with jitter, computed from an injected random and clock (no sleeping).
    @Test func retryScheduleHasJitterBoundsAndAnEnd() {
        let s = RetrySchedule.standard
        #expect(s.maxAttempts == 9)
        #expect(s.nextAttempt(afterFailed: 1, now: 1000, random: 0.5) == 6000)
        #expect(s.nextAttempt(afterFailed: 1, now: 0, random: 0) == 4000)
        #expect(s.nextAttempt(afterFailed: 1, now: 0, random: 1) == 6000)
        #expect(s.nextAttempt(afterFailed: 2, now: 0, random: 0.5) == 30_000)
        #expect(s.nextAttempt(afterFailed: 8, now: 0, random: 0.5) == 43_200_000)
        #expect(s.nextAttempt(afterFailed: 9, now: 0, random: 0.5) == nil)
        #expect(s.nextAttempt(afterFailed: 0, now: 0, random: 0.5) == nil)
        #expect(RetrySchedule.parse("250ms,2s,1m,1h")?.delays == [250, 2000, 60_000, 3_600_000])
        #expect(RetrySchedule.parse("5x") == nil && RetrySchedule.parse("") == nil)
    }

    // WH-4
    @Test func verdicts() {
        #expect(AttemptVerdict.of(status: 200) == .delivered && AttemptVerdict.of(status: 204) == .delivered)
        #expect(AttemptVerdict.of(status: 410) == .gone)
        for s in [301, 400, 404, 429, 500, 503] { #expect(AttemptVerdict.of(status: s) == .retry) }
    }

    // PX-3: user.online / user.offline in every format; RongCloud's is its user status sync
    // (status "0" online, "1" offline, os = the device), signed in the query as its status sync is.
    @Test func userStatusRendersInEveryFormat() throws {
        var m = WebhookMessage(id: "msg_2", app: "k", type: .userOnline, time: 1_795_000_000_000, roomId: "", userIds: ["alice"], cause: 0,
                               details: ["device": "phone"], sequence: 1)
        var e = WebhookEndpoint(id: "ep", app: "k", url: "https://example.com/h", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", events: [],
                                format: .rongcloud, allowPrivateNetwork: false, origin: "api", createdAt: 0)
        #expect(e.wants(.userOnline) && e.wants(.userOffline))
        let rc = try #require(WebhookRenderer.render(m, for: e, appSecret: "s", now: 5, nonce: "n"))
        #expect(String(decoding: rc.body, as: UTF8.self) == #"[{"os":"phone","status":"0","time":1795000000000,"userid":"alice"}]"#)
        #expect(rc.query.hasPrefix("appKey=k&timestamp=5&nonce=n&signature="))
        m.type = .userOffline
        let off = try #require(WebhookRenderer.render(m, for: e, appSecret: "s", now: 5, nonce: "n"))
        #expect(String(decoding: off.body, as: UTF8.self).contains(#""status":"1""#))
        e.format = .standard
        let std = try JSONSerialization.jsonObject(with: Data(try #require(WebhookRenderer.render(m, for: e, appSecret: "s", now: 5, nonce: "n")).body)) as? [String: Any]
        #expect(std?["type"] as? String == "user.offline" && (std?["data"] as? [String: Any])?["userIds"] as? [String] == ["alice"])
        e.format = .nim
        let nim = try JSONSerialization.jsonObject(with: Data(try #require(WebhookRenderer.render(m, for: e, appSecret: "s", now: 5, nonce: "n")).body)) as? [String: Any]
        #expect(nim?["eventType"] as? String == "user.offline" && (nim?["details"] as? [String: String])?["device"] == "phone")
    }

    // WH-3: bodies per format; RongCloud expresses only room create/join/quit/destroy.
    @Test func formatsRender() throws {
        let m = WebhookMessage(id: "msg_1", app: "k", type: .memberJoined, time: 1_795_000_000_123, roomId: "r1", userIds: ["u1"], cause: 0,
                               details: ["k": "v"], sequence: 1)
        var e = WebhookEndpoint(id: "ep", app: "k", url: "https://example.com/h", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", events: [],
                                format: .standard, allowPrivateNetwork: false, origin: "api", createdAt: 0)
        let std = try #require(WebhookRenderer.render(m, for: e, appSecret: "s", now: 1_795_000_001_000, nonce: "n"))
        let json = try JSONSerialization.jsonObject(with: Data(std.body)) as? [String: Any]
        #expect(json?["type"] as? String == "member.joined")
        #expect(json?["timestamp"] as? String == "2026-11-18T11:06:40.123Z")
        #expect((json?["data"] as? [String: Any])?["roomId"] as? String == "r1")
        let headers = Dictionary(uniqueKeysWithValues: std.headers)
        #expect(headers["webhook-id"] == "msg_1" && headers["webhook-timestamp"] == "1795000001")
        #expect(headers["webhook-signature"] == StandardWebhooks.signature(id: "msg_1", timestamp: 1_795_000_001, body: std.body, secrets: [e.secret]))

        e.format = .rongcloud
        let rc = try #require(WebhookRenderer.render(m, for: e, appSecret: "s", now: 5, nonce: "n"))
        let arr = try JSONSerialization.jsonObject(with: Data(rc.body)) as? [[String: Any]]
        #expect(arr?.first?["chatRoomId"] as? String == "r1" && arr?.first?["type"] as? Int == 1 && arr?.first?["status"] as? Int == 0)
        #expect(rc.query.hasPrefix("appKey=k&timestamp=5&nonce=n&signature="))
        var message = m
        message.type = .queueChanged
        #expect(WebhookRenderer.render(message, for: e, appSecret: "s", now: 5, nonce: "n") == nil)
        #expect(!e.wants(.queueChanged) && e.wants(.roomDestroyed))

        e.format = .nim
        let nim = try #require(WebhookRenderer.render(m, for: e, appSecret: "s", now: 7, nonce: "n"))
        #expect(Dictionary(uniqueKeysWithValues: nim.headers)["CurTime"] == "7")
        #expect((try JSONSerialization.jsonObject(with: Data(nim.body)) as? [String: Any])?["eventType"] as? String == "member.joined")
    }
}
