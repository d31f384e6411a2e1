import Chat
import Crypto
import Engine
import HTTP1
import Server
import Store
import Synchronization
import Wire
import Replication

/// PX-2: idempotent REST writes. A state-changing call sent with an `Idempotency-Key` (Nexconn's
/// SDK sends `X-Request-ID`) is answered once; the answer is made durable before it is sent, and
/// the same key with the same request gets it again for 24 hours (with `Idempotent-Replayed:
/// true`), also after a restart. The same key with another request is refused (422, 42200);
/// while the first is still being answered, a retry gets 409 (40900). Answers that say "try
/// again" (429, 5xx, or any with Retry-After, e.g. NIM's in a 200) are not kept. Keys are per app; at most 255 visible ASCII characters.
///
/// One path whatever the log (CLUSTER.md "Nonces and idempotency keys"): the replica is checked
/// for a kept answer; otherwise the call's first change carries its claim on the key into the log,
/// where it is judged alike on every node (`RequestLedger`): a key already claimed is not applied
/// again, and the retry gets the kept answer, 422, 409, or 40903 when the change was made and its
/// answer lost. A call that makes one change keeps its answer in that change's own transaction
/// (`ReplyTo.keeping`), so a crash leaves both or neither; every answer kept is also appended to
/// the log (every node of a cluster keeps it), and sent once this node has it.
final class Idempotency: Sendable {
    let store: Store
    let clock: @Sendable () -> Int64
    /// The engine whose log judges the keys and keeps the answers.
    let engine: Engine
    private let inFlight = Mutex<Set<String>>([])
    /// Answers kept per app since its last trim; every `trimEvery` the app's oldest beyond the
    /// bound are dropped.
    private let keptSinceTrim = Mutex<[String: Int]>([:])
    static let trimEvery = 1000
    static let maxKeyBytes = 255

    init(store: Store, clock: @escaping @Sendable () -> Int64, engine: Engine) {
        self.store = store
        self.clock = clock
        self.engine = engine
    }

    /// Counts an answer kept for `app`; true every `trimEvery`-th (that write also trims).
    private func countAndTrim(_ app: String) -> Bool {
        keptSinceTrim.withLock { k -> Bool in
            k[app, default: 0] += 1
            guard k[app]! >= Self.trimEvery else { return false }
            k[app] = 0
            return true
        }
    }

    enum Refusal {
        case invalidKey(header: String)
        case reused(header: String)
        case inFlight(header: String)
        /// The key's change was made and its answer lost (40903).
        case lost(header: String)

        /// The refusal as every surface words it (each renders it in its own codes, `RESTSurface`).
        var error: ChatError {
            switch self {
            case .invalidKey(let h): return ChatError(.invalidParameter, "\(h) is 1 to \(Idempotency.maxKeyBytes) visible ASCII characters", field: h)
            case .reused(let h): return ChatError(.idempotencyKeyReused, "this \(h) was used with another request", field: h)
            case .inFlight(let h): return ChatError(.idempotencyKeyInFlight, "a request with this \(h) is still being answered", field: h)
            case .lost(let h): return Idempotency.lostError(h)
            }
        }
    }

    /// 40903: the key's change was made, and its answer lost with the node that made it.
    static func lostError(_ header: String) -> ChatError { Engine.answerLostError(header: header) }

    /// The answer kept for a key, replayed.
    static func replay(_ kept: StoredAnswer) -> Response {
        var headers = HTTPHeaders()
        headers.add("Content-Type", kept.contentType)
        headers.add("Idempotent-Replayed", "true")
        return Response(status: HTTPStatus(code: kept.status), headers: headers, body: kept.body)
    }

    /// The key a request carries in the first of `headers` it has, and that header's name.
    static func key(_ request: Request, headers: [IdempotencyKeyHeader]) -> (key: String, header: String)? {
        for h in headers {
            if let k = request.head.headers[h.rawValue] { return (k, h.rawValue) }
        }
        return nil
    }

    /// Runs `handler` once per (app, key) and replays its answer; `refuse` renders a refusal in
    /// the surface's shape. `writer` carries the call's stamp (`SignedPipeline.stamped`).
    func run(_ request: Request, app: String, key: String, header: String, writer: ResponseWriter,
             refuse: @escaping @Sendable (Refusal) -> Response, _ handler: @escaping @Sendable (ResponseWriter) -> Void) {
        guard !key.isEmpty, key.utf8.count <= Self.maxKeyBytes, key.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return writer.send(refuse(.invalidKey(header: header)))
        }
        guard let stamp = writer.stamp else { preconditionFailure("a signed call's writer carries its stamp") }
        var hash = SHA256()
        hash.update(data: Array(request.head.method.rawValue.utf8) + [0x0A] + Array(request.head.target.utf8) + [0x0A])
        hash.update(data: request.body)
        let fingerprint = hexEncoded(Array(hash.finalize()))
        let id = app + "\u{0}" + key
        guard inFlight.withLock({ $0.insert(id).inserted }) else { return writer.send(refuse(.inFlight(header: header))) }
        let clock = self.clock
        let release: @Sendable () -> Void = { [self] in _ = inFlight.withLock { $0.remove(id) } }
        store.read { [self] s in
            let kept: StoredAnswer?
            do {
                kept = try s.storedAnswer(app: app, key: key, now: clock())
            } catch {
                release()
                return writer.send(RESTAPI.error(ChatError(.storageUnavailable, "the idempotency key could not be read; try again", field: header)))
            }
            if let kept {
                release()
                guard kept.fingerprint == fingerprint else { return writer.send(refuse(.reused(header: header))) }
                return writer.send(Self.replay(kept))
            }
            // The key's first call may be in the log already, its answer not yet in this node's
            // replica: the retry is told what the log says instead of running again.
            engine.keyVerdict(app: app, key: key, fingerprint: fingerprint) { [self] verdict in
                switch verdict {
                case nil:
                    runClaiming(stamp: stamp, app: app, key: key, header: header, fingerprint: fingerprint, writer: writer,
                                refuse: refuse, release: release, handler)
                case .otherRequest?:
                    release()
                    writer.send(refuse(.reused(header: header)))
                case .answerLost?:
                    release()
                    writer.send(refuse(.lost(header: header)))
                case .inProgress?, .answered?:
                    // Answered: its record is on its way into the replica (or in it by now); either
                    // way the client retries and gets it.
                    release()
                    writer.send(refuse(.inFlight(header: header)))
                }
            }
        }
    }

    /// The call's first change claims the key in the log; what the log decided replaces the call's
    /// own answer when the key was claimed before.
    private func runClaiming(stamp: RequestStamp, app: String, key: String, header: String, fingerprint: String,
                             writer: ResponseWriter, refuse: @escaping @Sendable (Refusal) -> Response, release: @escaping @Sendable () -> Void,
                             _ handler: @escaping @Sendable (ResponseWriter) -> Void) {
        stamp.setKey(key, fingerprint: fingerprint, header: header)
        let store = self.store, clock = self.clock, engine = self.engine
        let keeper = AnswerKeeper(app: app, key: key, fingerprint: fingerprint, trim: countAndTrim(app), clock: clock)
        handler(ResponseWriter(attachment: CallAttachment(stamp: stamp, keeper: keeper)) { response in
            switch stamp.refusal {
            case .none:
                break
            case .nonceReused:
                // A replayed request: the nonce's refusal, and nothing about the key.
                release()
                return writer.send(response)
            case .duplicate(.otherRequest):
                release()
                return writer.send(refuse(.reused(header: header)))
            case .duplicate(.inProgress):
                release()
                return writer.send(refuse(.inFlight(header: header)))
            case .duplicate(.answerLost):
                release()
                return writer.send(refuse(.lost(header: header)))
            case .duplicate(.answered):
                // Kept before the retry's change was applied (it is earlier in the log): replayed
                // from this node's replica.
                release()
                return store.read { s in
                    if let kept = try? s.storedAnswer(app: app, key: key, now: clock()), kept.fingerprint == fingerprint {
                        writer.send(Self.replay(kept))
                    } else {
                        // Forgotten in between (the app's bound): the change was made, its answer is gone.
                        writer.send(refuse(.lost(header: header)))
                    }
                }
            }
            // "Try again" answers are not kept, and the key is released.
            guard AnswerKeeper.isKeepable(response) else {
                release()
                engine.answerNotKept(stamp)
                return writer.send(response)
            }
            // What was kept with the change (one change) is what is sent; otherwise the answer
            // is kept now. Either way it goes into the log's state before it is sent.
            let kept = keeper.keptResponse
            let sent = kept ?? response
            engine.keepAnswer(stamp, status: sent.status.code, contentType: sent.headers["content-type"] ?? "application/json", body: sent.body,
                              keptWithChange: kept != nil) {
                release()
                writer.send(sent)
            }
        })
    }
}

/// What the gateway hands a signed call's handler with its writer: the call's stamp (its nonce and
/// idempotency key go into the log with its first change) and, with a key, the answer's keeper.
struct CallAttachment: Sendable {
    let stamp: RequestStamp?
    let keeper: AnswerKeeper?
}

extension ResponseWriter {
    /// The signed call this writer answers.
    var stamp: RequestStamp? { (attachment as? CallAttachment)?.stamp }
    var keeper: AnswerKeeper? { (attachment as? CallAttachment)?.keeper }
}

/// PX-2: hands a request's answer to the transaction that makes its change durable (the engine's
/// `ReplyTo.keeping`), so that a crash cannot leave a change made without the answer a retry
/// must get. The response kept is the one sent.
final class AnswerKeeper: Sendable {
    let app: String
    let key: String
    let fingerprint: String
    let trim: Bool
    let clock: @Sendable () -> Int64
    private let kept = Mutex<Response?>(nil)

    init(app: String, key: String, fingerprint: String, trim: Bool, clock: @escaping @Sendable () -> Int64) {
        self.app = app
        self.key = key
        self.fingerprint = fingerprint
        self.trim = trim
        self.clock = clock
    }

    /// The answer as it was written with its change (nil until then, and for answers not kept).
    var keptResponse: Response? { kept.withLock { $0 } }

    /// Answers that say "try again" are not kept: 429, 5xx, and any answer with `Retry-After`
    /// (every surface's storage, rate-limit and moderation refusals carry it — NIM's in a 200).
    static func isKeepable(_ response: Response) -> Bool {
        response.status.code != 429 && response.status.code < 500 && response.headers["retry-after"] == nil
    }

    /// The write that keeps `response` (nil for an answer that is not kept).
    func write(_ response: Response) -> (@Sendable (Store.Transaction) throws -> Void)? {
        guard Self.isKeepable(response) else { return nil }
        let answer = StoredAnswer(fingerprint: fingerprint, status: response.status.code,
                                  contentType: response.headers["content-type"] ?? "application/json", body: response.body, at: clock())
        let app = self.app, key = self.key, trim = self.trim
        return { tx in
            try Store.keepAnswer(app: app, key: key, answer, tx)
            if trim { try Store.trimAnswers(app: app, keep: Limits.maxIdempotentAnswersPerApp, tx) }
        }
    }

    /// For the engine: the write of the answer rendered from `result`, remembered as the one to send.
    func keep(_ response: Response) -> (@Sendable (Store.Transaction) throws -> Void)? {
        guard let w = write(response) else { return nil }
        kept.withLock { $0 = response }
        return w
    }
}

extension ReplyTo {
    /// `.keeping` when the writer carries an idempotency keeper (PX-2), else `.callback`; `render`
    /// turns the result into the HTTP answer.
    /// `done` runs once the change is durable, before the answer is sent.
    static func answer(_ writer: ResponseWriter, done: @escaping @Sendable (Result<Reply, ChatError>) -> Void = { _ in },
                       _ render: @escaping @Sendable (Result<Reply, ChatError>) -> Response) -> ReplyTo {
        guard let keeper = writer.keeper else {
            return .callback({ result in
                done(result)
                writer.send(render(result))
            })
        }
        return .keeping({ result in keeper.keep(render(result)) }, then: { result in
            done(result)
            writer.send(render(result))
        })
    }
}
