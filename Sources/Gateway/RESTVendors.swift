import Chat
import Engine
import HTTP1
import Server
import Wire

/// The vendors' server APIs (SPEC §8): each endpoint of `Vendor.endpoints` at its own path, signed
/// as that vendor signs, translated by Wire into the same domain commands and queries the native
/// API submits (VC-4), and answered in the vendor's shape and codes.
extension RESTAPI {
    func registerVendors(_ r: inout Router.Builder) {
        for vendor in Vendor.allCases {
            for endpoint in vendor.endpoints {
                let api = self
                r.add(.POST, endpoint.path) { req, writer in api.vendorCall(vendor, endpoint, req, writer) }
            }
        }
    }

    static func answer(_ a: VendorAnswer) -> Response {
        var response = Response.json(HTTPStatus(code: a.status), a.body)
        if let s = a.retryAfter { response.headers.add("Retry-After", String(s)) }
        return response
    }

    private func vendorCall(_ vendor: Vendor, _ endpoint: VendorEndpoint, _ req: Request, _ writer: ResponseWriter) {
        // A node that has not caught up with its log yet would answer from a stale replica.
        guard context.caughtUp.isReady else {
            return writer.send(Self.answer(vendor.failure(ChatError(.storageUnavailable, "the node is catching up with its log; try again shortly", field: nil))))
        }
        let app: String
        var writer = writer
        switch context.authenticator.authenticate(req.head, body: req.body) {
        case .failure(let e):
            writer.send(Self.answer(vendor.authFailure(e.code, message: e.message, field: e.field)))
            return
        case .success(let accepted):
            app = accepted.app
            // The call's nonce goes into the log (with its first change, or alone).
            writer = Self.stamped(writer, accepted, engine: context.engine)
        }
        // PX-1: one bucket per app for all its surfaces; RongCloud/Nexconn answer 1008, NIM 416.
        guard context.apps.takeRESTCall(app, now: context.clock()) else {
            writer.send(Self.answer(vendor.failure(ChatError(.rateLimited, "the app's REST rate limit (calls per second) was reached", field: nil))))
            return
        }
        // PX-2: the same key with the same call gets the first answer again (Nexconn: X-Request-ID).
        if let (key, header) = Idempotency.key(req, vendorRequestID: vendor == .nexconn) {
            return context.idempotency.run(req, app: app, key: key, header: header, writer: writer, refuse: { refusal in
                switch refusal {
                case .invalidKey(let h): return Self.answer(vendor.failure(ChatError(.invalidParameter, "\(h) is 1 to \(Idempotency.maxKeyBytes) visible ASCII characters", field: h)))
                case .reused(let h): return Self.answer(vendor.failure(ChatError(.invalidParameter, "this \(h) was used with another request", field: h)))
                case .inFlight(let h): return Self.answer(vendor.failure(ChatError(.alreadyExists, "a request with this \(h) is still being answered", field: h)))
                case .lost(let h): return Self.answer(vendor.failure(Idempotency.lostError(h)))
                }
            }) { w in self.vendorResolved(vendor, endpoint, req, app: app, w) }
        }
        vendorResolved(vendor, endpoint, req, app: app, writer)
    }

    private func vendorResolved(_ vendor: Vendor, _ endpoint: VendorEndpoint, _ req: Request, app: String, _ writer: ResponseWriter) {
        let resolution: VendorResolution
        do throws(ChatError) {
            let input = VendorInput(app: app, params: try vendor.params(req.body), publicURLs: context.publicURLs.value,
                                    newRoomNumber: context.roomNumber)
            resolution = try endpoint.resolve(input)
        } catch {
            writer.send(Self.answer(vendor.failure(error)))
            return
        }
        switch resolution {
        case .unsupported(let message):
            writer.send(Self.answer(vendor.unsupported(message)))
        case .call(let call):
            let render: @Sendable (Result<Reply, ChatError>) -> Response = { result in
                switch result {
                case .success(let reply): return Self.answer(vendor.success(reply, call.render))
                case .failure(let e): return Self.answer(vendor.failure(e))
                }
            }
            // One change: its answer is kept with it (PX-2) when the call carries a key.
            if case .command(let c) = call.work { return context.engine.submit(c, stamp: writer.stamp, replyTo: .answer(writer, render)) }
            Self.run(context.engine, call.work, stamp: writer.stamp) { result in writer.send(render(result)) }
        }
    }

    /// `stamp`: the signed call, whose first change carries its nonce and key.
    private static func run(_ engine: Engine, _ work: VendorCall.Work, stamp: RequestStamp?,
                            _ finish: @escaping @Sendable (Result<Reply, ChatError>) -> Void) {
        switch work {
        case .command(let c): engine.submit(c, stamp: stamp, replyTo: .callback(finish))
        case .query(let q): engine.query(q, reply: finish)
        case .commandThenQuery(let c, let q):
            engine.submit(c, stamp: stamp, replyTo: .callback({ result in
                switch result {
                case .success: engine.query(q, reply: finish)
                case .failure: finish(result)
                }
            }))
        case .commands(let commands, let tolerated):
            inOrder(engine, commands[...], tolerating: tolerated, stamp: stamp, finish)
        case .checked(let q, let check, let then):
            engine.query(q) { result in
                switch result {
                case .success(let reply):
                    if let refusal = check(reply) { finish(.failure(refusal)) } else { run(engine, then, stamp: stamp, finish) }
                case .failure: finish(result)
                }
            }
        }
    }

    /// Applies `commands` one after another, each once the one before is durable; stops at the
    /// first refusal that is not tolerated.
    private static func inOrder(_ engine: Engine, _ commands: ArraySlice<Command>, tolerating: Set<ChatErrorCode>, stamp: RequestStamp?,
                                _ finish: @escaping @Sendable (Result<Reply, ChatError>) -> Void) {
        guard let first = commands.first else { finish(.success(.done)); return }
        let rest = commands.dropFirst()
        engine.submit(first, stamp: stamp, replyTo: .callback({ result in
            if case .failure(let e) = result, !tolerating.contains(e.code) { finish(result); return }
            // A call whose first change the cluster's log refused (replayed nonce, claimed key) stops.
            if stamp?.refusal != nil { finish(result); return }
            inOrder(engine, rest, tolerating: tolerating, stamp: stamp, finish)
        }))
    }
}
