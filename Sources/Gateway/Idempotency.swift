import Chat
import Crypto
import HTTP1
import Server
import Store
import Synchronization
import Wire

/// PX-2: idempotent REST writes. A state-changing call sent with an `Idempotency-Key` (Nexconn's
/// SDK sends `X-Request-ID`) is answered once; the answer is made durable before it is sent, and
/// the same key with the same request gets it again for 24 hours (with `Idempotent-Replayed:
/// true`), also after a restart. The same key with another request is refused (422, 42200);
/// while the first is still being answered, a retry gets 409 (40900). Answers of 429 and 5xx are
/// not kept: they say "try again". Keys are per app; at most 255 visible ASCII characters.
final class Idempotency: Sendable {
    let store: Store
    let clock: @Sendable () -> Int64
    private let inFlight = Mutex<Set<String>>([])
    /// Answers kept per app since its last trim; every `trimEvery` the app's oldest beyond the
    /// bound are dropped.
    private let keptSinceTrim = Mutex<[String: Int]>([:])
    static let trimEvery = 1000
    static let maxKeyBytes = 255

    init(store: Store, clock: @escaping @Sendable () -> Int64) {
        self.store = store
        self.clock = clock
    }

    enum Refusal {
        case invalidKey(header: String)
        case reused(header: String)
        case inFlight(header: String)
    }

    /// The key a request carries, and the header it came in.
    static func key(_ request: Request, vendorRequestID: Bool) -> (key: String, header: String)? {
        if let k = request.head.headers["idempotency-key"] { return (k, "Idempotency-Key") }
        if vendorRequestID, let k = request.head.headers["x-request-id"] { return (k, "X-Request-ID") }
        return nil
    }

    /// Runs `handler` once per (app, key) and replays its answer; `refuse` renders a refusal in
    /// the surface's shape.
    func run(_ request: Request, app: String, key: String, header: String, writer: ResponseWriter,
             refuse: @escaping @Sendable (Refusal) -> Response, _ handler: @escaping @Sendable (ResponseWriter) -> Void) {
        guard !key.isEmpty, key.utf8.count <= Self.maxKeyBytes, key.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return writer.send(refuse(.invalidKey(header: header)))
        }
        var hash = SHA256()
        hash.update(data: Array(request.head.method.rawValue.utf8) + [0x0A] + Array(request.head.target.utf8) + [0x0A])
        hash.update(data: request.body)
        let fingerprint = hexEncoded(Array(hash.finalize()))
        let id = app + "\u{0}" + key
        guard inFlight.withLock({ $0.insert(id).inserted }) else { return writer.send(refuse(.inFlight(header: header))) }
        let store = self.store, clock = self.clock
        let release: @Sendable () -> Void = { [self] in _ = inFlight.withLock { $0.remove(id) } }
        store.read { s in
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
                var headers = HTTPHeaders()
                headers.add("Content-Type", kept.contentType)
                headers.add("Idempotent-Replayed", "true")
                return writer.send(Response(status: HTTPStatus(code: kept.status), headers: headers, body: kept.body))
            }
            handler(ResponseWriter { response in
                // "Try again" answers are not kept; everything else is on disk before it is sent.
                guard response.status.code != 429 && response.status.code < 500 else {
                    release()
                    return writer.send(response)
                }
                let answer = StoredAnswer(fingerprint: fingerprint, status: response.status.code,
                                          contentType: response.headers["content-type"] ?? "application/json", body: response.body, at: clock())
                let trim = self.keptSinceTrim.withLock { k -> Bool in
                    k[app, default: 0] += 1
                    guard k[app]! >= Self.trimEvery else { return false }
                    k[app] = 0
                    return true
                }
                store.submit(Store.Commit(mutations: [], extra: { tx in
                    try Store.keepAnswer(app: app, key: key, answer, tx)
                    if trim { try Store.trimAnswers(app: app, keep: Limits.maxIdempotentAnswersPerApp, tx) }
                }, onDurable: {
                    release()
                    writer.send(response)
                }, onFailed: {
                    release()
                    writer.send(RESTAPI.error(ChatError(.storageUnavailable, "the answer could not be kept; the change may have been made: retry with the same key", field: header)))
                }))
            })
        }
    }
}
