import Chat
import Crypto
import Foundation
import Logging
import Synchronization
import Testing
import TestKit
@testable import Webhooks

/// PX-4: the before-send hook's wire, pure (answers byte by byte, malformed ones, the three
/// signings), and the service's bound of messages waiting for a verdict.
@Suite("Before-send hook wire (PX-4)")
struct BeforeSendWireTests {
    static let subject = SendSubject(app: "app1", roomId: "r", userId: "alice", nickname: "Alice", avatar: "", ext: "", deviceId: "web",
                                     kind: .text, content: "héllo \"quoted\"", fromServer: false)

    @Test func verdictsFromAnswers() {
        func v(_ status: Int, _ body: String, error: String = "") -> BeforeSendVerdict {
            BeforeSendWire.verdict(status: status, body: Array(body.utf8), error: error)
        }
        #expect(v(200, #"{"action":"pass"}"#) == .pass)
        #expect(v(204, "") == .pass)
        #expect(v(200, " \r\n") == .pass)
        #expect(v(200, #"{"action":"drop"}"#) == .drop(reason: ""))
        #expect(v(200, #"{"action":"drop","reason":"spam"}"#) == .drop(reason: "spam"))
        #expect(v(200, #"{"action":"replace","content":"ok ✓"}"#) == .replace(content: "ok ✓"))
        // The reason passed on is bounded.
        if case .drop(let r) = v(200, #"{"action":"drop","reason":""# + String(repeating: "x", count: 500) + #""}"#) {
            #expect(r.utf8.count == Limits.maxBeforeSendReasonBytes)
        } else {
            Issue.record("a long reason is still a drop")
        }
        // Everything else is no verdict (the app's policy decides).
        let broken: [(Int, String, String)] = [
            (500, #"{"action":"pass"}"#, ""), (302, "", ""), (404, "", ""), (0, "", "Timeout was reached"), (200, #"{"action":"pass"}"#, "Timeout was reached"),
            (200, "not json", ""), (200, "[]", ""), (200, #"{"action":1}"#, ""), (200, #"{"action":"PASS"}"#, ""), (200, #"{"action":"replace"}"#, ""),
            (200, #"{"action":"replace","content":5}"#, ""), (200, #"{"act"#, ""), (200, "null", ""), (200, #"{}"#, ""),
        ]
        for (status, body, error) in broken {
            guard case .failed(let why) = v(status, body, error: error) else {
                Issue.record("\(status) \(body) \(error) should be no verdict")
                continue
            }
            #expect(!why.isEmpty)
        }
    }

    @Test func requestBodyAndSignings() throws {
        let now: Int64 = 1_800_000_000_123
        let standard = BeforeSendWire.request(Self.subject, signing: "standard", appSecret: "s3cret", id: "bs_1", now: now)
        let body = try #require(JSONSerialization.jsonObject(with: Data(standard.body)) as? [String: Any])
        #expect(body["type"] as? String == "message.beforeSend" && body["id"] as? String == "bs_1")
        #expect(body["timestamp"] as? String == "2027-01-15T08:00:00.123Z")
        let data = try #require(body["data"] as? [String: Any])
        #expect(data["content"] as? String == "héllo \"quoted\"" && data["fromUserId"] as? String == "alice" && data["deviceId"] as? String == "web")
        #expect(data["type"] as? String == "text" && data["fromServer"] as? Bool == false && data["time"] as? Int64 == now)
        let h = Dictionary(uniqueKeysWithValues: standard.headers.map { ($0.0, $0.1) })
        let mac = HMAC<SHA256>.authenticationCode(for: Array("bs_1.\(now / 1000).".utf8) + standard.body, using: SymmetricKey(data: Array("s3cret".utf8)))
        #expect(h["webhook-signature"] == "v1," + Data(mac).base64EncodedString() && h["webhook-id"] == "bs_1" && standard.query.isEmpty)

        let nim = BeforeSendWire.request(Self.subject, signing: "nim", appSecret: "s3cret", id: "bs_2", now: now)
        let n = Dictionary(uniqueKeysWithValues: nim.headers.map { ($0.0, $0.1) })
        let md5 = Insecure.MD5.hash(data: nim.body).map { String(format: "%02x", $0) }.joined()
        let sum = Insecure.SHA1.hash(data: Array(("s3cret" + md5 + String(now)).utf8)).map { String(format: "%02x", $0) }.joined()
        #expect(n["MD5"] == md5 && n["CheckSum"] == sum && n["AppKey"] == "app1" && n["CurTime"] == String(now))

        let rc = BeforeSendWire.request(Self.subject, signing: "rongcloud", appSecret: "s3cret", id: "bs_3", now: now)
        let sig = Insecure.SHA1.hash(data: Array(("s3cret" + "bs_3" + String(now)).utf8)).map { String(format: "%02x", $0) }.joined()
        #expect(rc.query == "appKey=app1&timestamp=\(now)&nonce=bs_3&signature=\(sig)")
    }

    // The server holds at most `maxBeforeSendPendingPerApp` messages of one app waiting for its
    // hook: past it a message is judged overloaded at once (refused whatever the app's policy),
    // while another app is still asked.
    @Test func waitingMessagesAreBoundedPerApp() throws {
        let release = Atomic<Bool>(false)
        let hook = try HTTPReceiver { _ in
            for _ in 0..<100 where !release.load(ordering: .relaxed) { usleep(50_000) }
            return HTTPReceiver.Answer(status: 204)
        }
        defer { hook.stop() }
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let counter = Atomic<Int>(0)
        let service = BeforeSendService(allowsPrivate: { _ in true }, appSecret: { _ in "secret" }, clock: { 1_800_000_000_000 },
                                        makeID: { String(counter.add(1, ordering: .relaxed).newValue) }, logger: logger)
        service.start()
        defer { service.stop() }
        var settings = BeforeSendSettings(url: hook.url())
        settings.timeoutMilliseconds = 10_000
        let verdicts = Mutex<[String: [BeforeSendVerdict]]>([:])
        func ask(_ app: String) {
            var s = Self.subject
            s.app = app
            service.check(s, settings: settings) { v in verdicts.withLock { $0[app, default: []].append(v) } }
        }
        for _ in 0..<Limits.maxBeforeSendPendingPerApp { ask("a") }
        #expect(service.waiting == Limits.maxBeforeSendPendingPerApp)
        ask("a")
        let over = verdicts.withLock { $0["a"] ?? [] }
        #expect(over.count == 1)
        if case .overloaded(let why) = over.first { #expect(why.contains("too many")) } else { Issue.record("expected overloaded, got \(over)") }
        ask("b")
        #expect(service.waiting == Limits.maxBeforeSendPendingPerApp + 1)
        release.store(true, ordering: .relaxed)
        let deadline = Date().addingTimeInterval(30)
        while service.waiting > 0 && Date() < deadline { usleep(20_000) }
        #expect(service.waiting == 0)
        let all = verdicts.withLock { $0 }
        #expect(all["a"]?.filter { $0 == .pass }.count == Limits.maxBeforeSendPendingPerApp && all["b"] == [.pass])
    }

    // A service that is not running (or stopping) refuses at once — never lets a message pass as
    // if the hook had failed — and releases what it counted.
    @Test func aStoppedServiceRefuses() throws {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let service = BeforeSendService(allowsPrivate: { _ in true }, appSecret: { _ in "secret" }, clock: { 0 }, makeID: { "1" }, logger: logger)
        let verdicts = Mutex<[BeforeSendVerdict]>([])
        service.check(Self.subject, settings: BeforeSendSettings(url: "http://127.0.0.1:9/hook")) { v in verdicts.withLock { $0.append(v) } }
        service.start()
        service.stop()
        service.check(Self.subject, settings: BeforeSendSettings(url: "http://127.0.0.1:9/hook")) { v in verdicts.withLock { $0.append(v) } }
        let all = verdicts.withLock { $0 }
        #expect(all.count == 2 && all.allSatisfy { if case .unavailable = $0 { true } else { false } })
        #expect(service.waiting == 0)
    }
}
