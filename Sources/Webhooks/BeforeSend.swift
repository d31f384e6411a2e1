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
    /// No usable verdict from the hook: no answer within the timeout, a transport error, a status
    /// other than 2xx, or a body that is not a verdict. The app's policy decides (fail open: sent;
    /// fail closed: refused with 50302).
    case failed(String)
    /// The server holds as many of the app's messages waiting for verdicts as it may: refused
    /// (42901) whatever the policy — an overload never lets a message past moderation.
    case overloaded(String)
    /// The hook service is stopping (or not running): refused (50302) whatever the policy.
    case unavailable(String)
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
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
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
/// Bounded per app, so that one app's slow hook or large messages cannot hold the server's memory
/// or another app's room: at most `Limits.maxBeforeSendPendingPerApp` messages and
/// `Limits.maxBeforeSendPendingBytesPerApp` bytes of one app wait for verdicts (and
/// `Limits.maxBeforeSendPendingBytes` in all); past a bound the message is judged `.overloaded`
/// at once. Answers are read up to `Limits.maxBeforeSendAnswerBytes`; at most
/// `Limits.maxBeforeSendConnectionsPerHost` connections go to one host and
/// `Limits.maxBeforeSendConnections` in all.
public final class BeforeSendService: @unchecked Sendable {
    // Safety: `transport`, `inFlight` and `nextTag` are touched only on the hook thread (`run`),
    // and by `stop()` after it has joined that thread; `inbox` (with the `stopped` flag it holds),
    // `pending` and `stopping` are synchronized; `multi` and `thread` are written only by
    // `start()`, which the owner calls once before the service is shared with other threads
    // (the engine), and by `stop()` on the owner's thread.
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

    private struct Inbox {
        var jobs: [Job] = []
        /// Set by `stop()`: no job is taken after it.
        var closed = false
    }
    private let inbox = Mutex(Inbox())
    private struct Pending {
        struct App {
            var count = 0
            var bytes = 0
        }
        var perApp: [String: App] = [:]
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
        /// Refused at once: the app had as many messages waiting as the server holds.
        public let overloaded = Atomic<Int>(0)
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
        precondition(thread == nil, "BeforeSendService.start() is called once")
        let t = CurlTransport(maxResponseBytes: Limits.maxBeforeSendAnswerBytes, abortAfterBytes: Limits.maxBeforeSendAnswerBytes + 1,
                              maxConnectionsPerHost: Limits.maxBeforeSendConnectionsPerHost, maxConnections: Limits.maxBeforeSendConnections,
                              userAgent: "Roomcast-BeforeSend/1")
        transport = t
        multi = t.handle
        thread = PosixThread.start(name: "roomcast-hooks") { [self] in run() }
    }

    /// Stops the thread; messages still waiting are judged `.unavailable` (refused whatever
    /// their app's policy: a stopping server sends nothing unjudged).
    public func stop() {
        stopping.store(true, ordering: .releasing)
        let waiting = inbox.withLock { i -> [Job] in
            i.closed = true
            defer { i.jobs.removeAll() }
            return i.jobs
        }
        if let multi { CurlTransport.wakeup(multi) }
        thread?.join()
        thread = nil
        for job in waiting + inFlight.values { finish(job, .unavailable("the server is stopping")) }
        inFlight.removeAll()
    }

    /// Asks `settings`' hook about `subject`; `completion` gets the verdict exactly once (on the
    /// hook thread, or at once on this thread when the server holds too many waiting messages).
    public func check(_ subject: SendSubject, settings: BeforeSendSettings, completion: @escaping Completion) {
        // Ours and libcurl's copy of the request, its body escaped as JSON at worst.
        let bytes = 2 * (512 + Self.escapedLength(subject.content) + Self.escapedLength(subject.nickname)
                         + Self.escapedLength(subject.roomId) + Self.escapedLength(subject.userId) + Self.escapedLength(subject.deviceId))
        let admitted = pending.withLock { p -> Bool in
            let app = p.perApp[subject.app, default: Pending.App()]
            guard app.count < Limits.maxBeforeSendPendingPerApp, app.bytes + bytes <= Limits.maxBeforeSendPendingBytesPerApp,
                  p.bytes + bytes <= Limits.maxBeforeSendPendingBytes else { return false }
            p.perApp[subject.app] = Pending.App(count: app.count + 1, bytes: app.bytes + bytes)
            p.bytes += bytes
            return true
        }
        guard admitted else {
            stats.overloaded.add(1, ordering: .relaxed)
            completion(.overloaded("too many of this app's messages are waiting for its before-send hook"))
            return
        }
        let job = Job(subject: subject, settings: settings, bytes: bytes, completion: completion)
        let queued = inbox.withLock { i -> Bool in
            guard !i.closed, multi != nil else { return false }
            i.jobs.append(job)
            return true
        }
        guard queued else {
            finish(job, .unavailable("the before-send hook service is not running"))
            return
        }
        if let multi { CurlTransport.wakeup(multi) }
    }

    /// Bytes of `s` as a JSON string's contents (quotes, backslashes and control characters escaped).
    static func escapedLength(_ s: String) -> Int {
        var n = 0
        for b in s.utf8 {
            switch b {
            case 0x22, 0x5C, 0x08, 0x0C, 0x0A, 0x0D, 0x09: n += 2
            case 0..<0x20: n += 6
            default: n += 1
            }
        }
        return n
    }

    /// Messages waiting for a verdict now (all apps).
    public var waiting: Int { pending.withLock { $0.perApp.values.reduce(0) { $0 + $1.count } } }

    private func release(_ app: String, _ bytes: Int) {
        pending.withLock { p in
            p.bytes -= bytes
            guard var a = p.perApp[app] else { return }
            a.count -= 1
            a.bytes -= bytes
            p.perApp[app] = a.count == 0 ? nil : a
        }
    }

    private func finish(_ job: Job, _ verdict: BeforeSendVerdict) {
        switch verdict {
        case .pass: stats.passed.add(1, ordering: .relaxed)
        case .drop: stats.dropped.add(1, ordering: .relaxed)
        case .replace: stats.replaced.add(1, ordering: .relaxed)
        case .failed(let why), .unavailable(let why):
            stats.failed.add(1, ordering: .relaxed)
            logger.debug("before-send hook failed", metadata: ["app": "\(job.subject.app)", "why": "\(why)"])
        case .overloaded:
            stats.overloaded.add(1, ordering: .relaxed)
        }
        release(job.subject.app, job.bytes)
        job.completion(verdict)
    }

    private func run() {
        guard let transport else { return }
        while !stopping.load(ordering: .acquiring) {
            let jobs = inbox.withLock { i -> [Job] in
                defer { i.jobs.removeAll(keepingCapacity: true) }
                return i.jobs
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
            if inbox.withLock({ $0.jobs.isEmpty }) { transport.poll(timeoutMs: 1000) }
        }
    }
}
