import Chat
import Foundation
import Logging
import Reactor
import Synchronization

/// What an app's before-send hook decided about one room message (PX-4).
public enum BeforeSendVerdict: Equatable, Sendable {
    case pass
    /// The message is not sent; the sender is told (40303) with the hook's reason, if any.
    case drop(reason: String)
    /// The message is sent with this content instead.
    case replace(content: String)
    /// No usable verdict: no answer within the timeout, a transport error, a status other than
    /// 2xx, a body that is not a verdict, or more messages waiting than the server holds. The
    /// app's policy decides (fail open: sent; fail closed: refused with 50302).
    case failed(String)
}

/// The before-send hook's wire: the request the gateway makes and the answers it understands.
/// Pure: time and the request id come from the caller.
public enum BeforeSendWire {
    public static let eventType = "message.beforeSend"

    struct Body: Encodable {
        struct Data: Encodable {
            var appKey: String
            var roomId: String
            var fromUserId: String
            var nickname: String
            var deviceId: String
            var type: String
            var content: String
            var fromServer: Bool
            var time: Int64
        }
        var type: String
        var id: String
        var timestamp: String
        var data: Data
    }

    /// The request for `subject`: a Standard Webhooks-shaped JSON body, signed as the app's
    /// webhooks are — `standard`: `webhook-id/-timestamp/-signature` with the app secret as the
    /// HMAC key (a receiver's Standard Webhooks library takes it as `whsec_` + base64 of the
    /// secret's UTF-8 bytes); `rongcloud`: the signature in the query string; `nim`: the
    /// `CheckSum` headers.
    public static func request(_ subject: SendSubject, signing: String, appSecret: String, id: String, now: Int64) -> RenderedRequest {
        let body = WebhookRenderer.encode(Body(
            type: eventType, id: id, timestamp: WebhookRenderer.rfc3339(now),
            data: .init(appKey: subject.app, roomId: subject.roomId, fromUserId: subject.userId, nickname: subject.nickname,
                        deviceId: subject.deviceId, type: subject.kind.rawValue, content: subject.content, fromServer: subject.fromServer,
                        time: now)))
        switch signing {
        case "rongcloud":
            return RenderedRequest(body: body, headers: [("Content-Type", "application/json"), ("X-Roomcast-Message-Id", id)],
                                   query: RongCloudCallback.query(appKey: subject.app, appSecret: appSecret, nonce: id, timestamp: now))
        case "nim":
            return RenderedRequest(body: body, headers: [("Content-Type", "application/json")]
                                   + NIMCallback.headers(appKey: subject.app, appSecret: appSecret, body: body, curTime: now), query: "")
        default:
            let seconds = now / 1000
            let secret = StandardWebhooks.secretPrefix + Data(appSecret.utf8).base64EncodedString()
            return RenderedRequest(body: body, headers: [
                ("Content-Type", "application/json"), ("webhook-id", id), ("webhook-timestamp", String(seconds)),
                ("webhook-signature", StandardWebhooks.signature(id: id, timestamp: seconds, body: body, secrets: [secret])),
            ], query: "")
        }
    }

    /// The verdict in an answer. A 2xx answer with an empty body passes; otherwise the body is a
    /// JSON object `{"action": "pass" | "drop" | "replace", "content": "…" (replace), "reason": "…"
    /// (drop, optional)}`. Anything else is `.failed`, with why. `error` is the transport's error
    /// ("" when a response arrived).
    public static func verdict(status: Int, body: [UInt8], error: String) -> BeforeSendVerdict {
        guard error.isEmpty, status != 0 else { return .failed(error.isEmpty ? "no response" : error) }
        guard (200..<300).contains(status) else { return .failed("the hook answered HTTP \(status)") }
        if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return .pass }
        guard body.count <= Limits.maxBeforeSendAnswerBytes,
              let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
              let action = object["action"] as? String else {
            return .failed("the hook's answer is not a JSON object with an action")
        }
        switch action {
        case "pass":
            return .pass
        case "drop":
            let reason = (object["reason"] as? String) ?? ""
            return .drop(reason: String(decoding: Array(reason.utf8.prefix(Limits.maxBeforeSendReasonBytes)), as: UTF8.self))
        case "replace":
            guard let content = object["content"] as? String else { return .failed("the hook's replace answer has no content string") }
            return .replace(content: content)
        default:
            return .failed("the hook's action must be pass, drop or replace")
        }
    }
}

/// Posts room messages to their app's before-send hook on a thread of its own (libcurl multi:
/// many requests in flight, connections kept alive), so neither an I/O loop nor the engine ever
/// waits for a hook. Each verdict goes to the completion the caller gave, on this thread.
///
/// Bounded: at most `Limits.maxBeforeSendPendingPerApp` messages of one app and
/// `Limits.maxBeforeSendPendingBytes` of content in all wait for verdicts (past either, the
/// message is judged `.failed` at once, so one app's slow hook cannot hold the server's memory or
/// another app's messages); answers are read up to `Limits.maxBeforeSendAnswerBytes`; at most
/// `Limits.maxBeforeSendConnections` connections are open.
public final class BeforeSendService: @unchecked Sendable {
    // Safety: `transport`, `inFlight` and `nextTag` are touched only on the hook thread (`run`);
    // `inbox`, `pending` and `stopping` are synchronized; `multi` and `thread` are set once in
    // `start` before any other thread can see them, and read-only after.
    public typealias Completion = @Sendable (BeforeSendVerdict) -> Void

    struct Job: Sendable {
        var subject: SendSubject
        var settings: BeforeSendSettings
        var bytes: Int
        var completion: Completion
    }

    /// Whom a hook may reach: the webhook egress policy (WH-5) — loopback, private and
    /// link-local addresses only for apps the operator allows.
    private let allowsPrivate: @Sendable (String) -> Bool
    private let appSecret: @Sendable (String) -> String?
    private let clock: @Sendable () -> Int64
    private let makeID: @Sendable () -> String
    private let logger: Logger

    private let inbox = Mutex<[Job]>([])
    private struct Pending {
        var perApp: [String: Int] = [:]
        var bytes = 0
    }
    private let pending = Mutex(Pending())
    private let stopping = Atomic<Bool>(false)
    private var transport: CurlTransport?
    private var multi: UnsafeMutableRawPointer?
    private var thread: PosixThread?
    private var inFlight: [Int: Job] = [:]
    private var nextTag = 0

    /// Verdicts so far, by kind (for `/metrics`).
    public final class Stats: Sendable {
        public let passed = Atomic<Int>(0)
        public let dropped = Atomic<Int>(0)
        public let replaced = Atomic<Int>(0)
        public let failed = Atomic<Int>(0)
    }
    public let stats = Stats()

    public init(allowsPrivate: @escaping @Sendable (String) -> Bool, appSecret: @escaping @Sendable (String) -> String?,
                clock: @escaping @Sendable () -> Int64, makeID: @escaping @Sendable () -> String, logger: Logger) {
        self.allowsPrivate = allowsPrivate
        self.appSecret = appSecret
        self.clock = clock
        self.makeID = makeID
        self.logger = logger
    }

    public func start() {
        let t = CurlTransport(maxResponseBytes: Limits.maxBeforeSendAnswerBytes, abortAfterBytes: Limits.maxBeforeSendAnswerBytes + 1,
                              maxConnectionsPerHost: Limits.maxBeforeSendConnections, maxConnections: Limits.maxBeforeSendConnections,
                              userAgent: "Roomcast-BeforeSend/1")
        transport = t
        multi = t.handle
        thread = PosixThread.start(name: "roomcast-hooks") { [self] in run() }
    }

    /// Stops the thread; messages still waiting are judged `.failed` (their app's policy decides).
    public func stop() {
        stopping.store(true, ordering: .releasing)
        if let multi { CurlTransport.wakeup(multi) }
        thread?.join()
        thread = nil
        for job in inbox.withLock({ w -> [Job] in defer { w.removeAll() }; return w }) + inFlight.values {
            finish(job, .failed("the server is stopping"))
        }
        inFlight.removeAll()
    }

    /// Asks `settings`' hook about `subject`; `completion` gets the verdict exactly once (on the
    /// hook thread, or at once on this thread when the server holds too many waiting messages).
    public func check(_ subject: SendSubject, settings: BeforeSendSettings, completion: @escaping Completion) {
        let bytes = subject.content.utf8.count + subject.nickname.utf8.count + subject.roomId.utf8.count + subject.userId.utf8.count + 512
        let admitted = pending.withLock { p -> Bool in
            guard p.perApp[subject.app, default: 0] < Limits.maxBeforeSendPendingPerApp,
                  p.bytes + bytes <= Limits.maxBeforeSendPendingBytes else { return false }
            p.perApp[subject.app, default: 0] += 1
            p.bytes += bytes
            return true
        }
        guard admitted, multi != nil, !stopping.load(ordering: .acquiring) else {
            stats.failed.add(1, ordering: .relaxed)
            completion(.failed(admitted ? "the hook service is not running" : "too many messages of this app are waiting for its hook"))
            if admitted { release(subject.app, bytes) }
            return
        }
        inbox.withLock { $0.append(Job(subject: subject, settings: settings, bytes: bytes, completion: completion)) }
        if let multi { CurlTransport.wakeup(multi) }
    }

    /// Messages waiting for a verdict now (all apps).
    public var waiting: Int { pending.withLock { $0.perApp.values.reduce(0, +) } }

    private func release(_ app: String, _ bytes: Int) {
        pending.withLock { p in
            p.bytes -= bytes
            let n = p.perApp[app, default: 1] - 1
            p.perApp[app] = n == 0 ? nil : n
        }
    }

    private func finish(_ job: Job, _ verdict: BeforeSendVerdict) {
        switch verdict {
        case .pass: stats.passed.add(1, ordering: .relaxed)
        case .drop: stats.dropped.add(1, ordering: .relaxed)
        case .replace: stats.replaced.add(1, ordering: .relaxed)
        case .failed(let why):
            stats.failed.add(1, ordering: .relaxed)
            logger.debug("before-send hook failed", metadata: ["app": "\(job.subject.app)", "why": "\(why)"])
        }
        release(job.subject.app, job.bytes)
        job.completion(verdict)
    }

    private func run() {
        guard let transport else { return }
        while !stopping.load(ordering: .acquiring) {
            let jobs = inbox.withLock { w -> [Job] in
                defer { w.removeAll(keepingCapacity: true) }
                return w
            }
            let now = clock()
            for job in jobs {
                guard let secret = appSecret(job.subject.app) else {
                    finish(job, .failed("unknown app"))
                    continue
                }
                let id = "bs_" + makeID()
                let r = BeforeSendWire.request(job.subject, signing: job.settings.signing, appSecret: secret, id: id, now: now)
                let url = r.query.isEmpty ? job.settings.url : job.settings.url + (job.settings.url.contains("?") ? "&" : "?") + r.query
                nextTag &+= 1
                inFlight[nextTag] = job
                let timeout = job.settings.timeoutMilliseconds
                transport.start(TransferJob(tag: nextTag, url: url, headers: r.headers, body: r.body,
                                            allowPrivateNetwork: allowsPrivate(job.subject.app), timeoutMs: timeout, connectTimeoutMs: timeout))
            }
            while true {
                let done = transport.perform()
                for (tag, result) in done {
                    guard let job = inFlight.removeValue(forKey: tag) else { continue }
                    finish(job, BeforeSendWire.verdict(status: result.status, body: result.responsePrefix, error: result.error))
                }
                if done.isEmpty { break }
            }
            if inbox.withLock({ $0.isEmpty }) { transport.poll(timeoutMs: 1000) }
        }
    }
}
