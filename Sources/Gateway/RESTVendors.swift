import Chat
import Engine
import HTTP1
import Server
import Wire

/// The vendors' server APIs (SPEC §8): each endpoint of `Vendor.endpoints` at its own path, signed
/// as that vendor signs, translated by Wire into the same domain commands and queries the native
/// API submits (VC-4), and answered in the vendor's shape and codes.
extension RESTAPI {
    /// Each vendor's endpoints, bound through the signed-request pipeline with that vendor's
    /// refusals (its envelope and codes; Nexconn also reads `X-Request-ID` as the idempotency key).
    func registerVendors(_ r: inout Router.Builder) {
        let api = self
        for vendor in Vendor.allCases {
            var routes = SignedRoutes<VendorEndpoint>(.vendor(vendor), pipeline: pipeline)
            for endpoint in vendor.endpoints {
                routes.signed(endpoint) { req, caller, writer in api.vendorResolved(vendor, endpoint, req, app: caller.app, writer) }
            }
            r.add(routes)
        }
    }

    static func answer(_ a: VendorAnswer) -> Response {
        var response = Response.json(HTTPStatus(code: a.status), a.body)
        if let s = a.retryAfter { response.headers.add("Retry-After", String(s)) }
        return response
    }

    private func vendorResolved(_ vendor: Vendor, _ endpoint: VendorEndpoint, _ req: Request, app: String, _ writer: ResponseWriter) {
        let resolution: VendorResolution
        do throws(ChatError) {
            let input = VendorInput(app: app, params: try vendor.params(req.body), publicURLs: context.publicURLs.value,
                                    newRoomNumber: context.roomNumber)
            resolution = try endpoint.resolve(input)
        } catch {
            // Refused while the call's parameters were read: the field is already the name the
            // caller sent (Nexconn's `channelId` is its room, not the domain's channel).
            writer.send(Self.answer(vendor.failure(error, asSent: true)))
            return
        }
        switch resolution {
        case .unsupported(let message):
            writer.send(Self.answer(vendor.unsupported(message)))
        case .call(let resolved):
            let call = resolved.via(vendor)
            let render: @Sendable (Result<Reply, ChatError>) -> Response = { result in
                switch result {
                case .success(let reply): return Self.answer(vendor.success(reply, call.render))
                case .failure(let e): return Self.answer(vendor.failure(e, fields: call.fields))
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
        }
    }

    /// Applies `commands` one after another, each once the one before is durable; stops at the
    /// first refusal that is not tolerated.
    private static func inOrder(_ engine: Engine, _ commands: ArraySlice<Command>, tolerating: Set<ErrorCode>, stamp: RequestStamp?,
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
