import Chat
import Engine
import HTTP1
import Replication
import Server
import Wire

/// How one REST surface answers what the signed-request pipeline refuses, and where it reads an
/// idempotency key. The native API and each vendor's API run the same steps and differ only in
/// these: the native error body, or the vendor's envelope and codes.
struct RESTSurface: Sendable {
    /// The name its route group registers under (`Router.Registration.group`).
    let name: String
    /// PX-2: the headers that carry an idempotency key, the first present winning.
    let idempotencyKeyHeaders: [IdempotencyKeyHeader]
    /// The answer while the node has not caught up with its log.
    let catchingUp: Response
    /// A refused signature, app key, timestamp or nonce.
    let authFailure: @Sendable (GatewayError) -> Response
    /// A refusal of the call: the app's rate limit, an idempotency refusal, the handler's own.
    let failure: @Sendable (ChatError) -> Response

    /// PX-2 refusals read the same on every surface and are spelled in its codes (a vendor names a
    /// reused key a parameter error and one in flight "already exists", `Vendor.failure`).
    func refusal(_ r: Idempotency.Refusal) -> Response { failure(r.error) }

    static let native = RESTSurface(
        name: "native", idempotencyKeyHeaders: NativeRoute.idempotencyKeyHeaders,
        catchingUp: RESTAPI.error(GatewayError(.unavailable, "the node is catching up with its log; try again shortly")),
        authFailure: { RESTAPI.error($0) }, failure: { RESTAPI.error($0) })

    /// A vendor's surface (SPEC §8): its refusals in its envelope and codes. The node catching up
    /// is, for a vendor, the "storage unavailable" refusal it already knows (with Retry-After).
    static func vendor(_ vendor: Vendor) -> RESTSurface {
        RESTSurface(
            name: vendor.rawValue, idempotencyKeyHeaders: vendor.idempotencyKeyHeaders,
            catchingUp: RESTAPI.answer(vendor.failure(ChatError(.storageUnavailable, "the node is catching up with its log; try again shortly", field: nil))),
            authFailure: { RESTAPI.answer(vendor.authFailure($0.code, message: $0.message, field: $0.field)) },
            failure: { RESTAPI.answer(vendor.failure($0)) })
    }
}

/// The steps every signed REST call takes before its handler, whichever surface it came in on:
/// the node must have caught up with its log, the signature is verified, the call is stamped for
/// the log, the app's rate limit is taken (PX-1), and a change sent with an idempotency key is made
/// once (PX-2). Written once here; a surface only says how its refusals read.
struct SignedPipeline: Sendable {
    /// A signed call's handler: the request, the app server that signed it, and the writer that
    /// carries the call's stamp (and, with an idempotency key, its answer's keeper).
    typealias Handler = @Sendable (Request, Caller, ResponseWriter) -> Void

    let context: GatewayContext

    /// `handler` behind the pipeline, answering refusals as `surface` does. File-private: a signed
    /// route is registered only through a `SignedRoutes` group, which names it by its table entry
    /// and registers it under the surface's name, so the route table test sees every one.
    fileprivate func wrap(_ surface: RESTSurface, _ handler: @escaping Handler) -> @Sendable (Request, ResponseWriter) -> Void {
        let auth = context.authenticator
        let apps = context.apps
        let clock = context.clock
        let idempotency = context.idempotency
        let caughtUp = context.caughtUp
        let engine = context.engine
        return { request, writer in
            // A node that has not caught up with its log yet would answer from a stale replica.
            guard caughtUp.isReady else { return writer.send(surface.catchingUp) }
            let accepted: RequestAuthenticator.Accepted
            switch auth.authenticate(request.head, body: request.body) {
            case .failure(let e): return writer.send(surface.authFailure(e))
            case .success(let a): accepted = a
            }
            let app = accepted.app
            // The call's nonce goes into the log (with its first change, or alone once it is
            // answered), so no node of a cluster accepts the call again.
            let writer = Self.stamped(writer, accepted, engine: engine)
            // PX-1: one bucket per app for all its surfaces; another app's bucket is not touched.
            guard apps.takeRESTCall(app, now: clock()) else {
                return writer.send(surface.failure(ChatError(.rateLimited, "the app's REST rate limit (calls per second) was reached", field: nil)))
            }
            // PX-2: a change sent with an idempotency key is made once and its answer replayed.
            if request.head.method != .GET && request.head.method != .HEAD,
               let (key, header) = Idempotency.key(request, headers: surface.idempotencyKeyHeaders) {
                return idempotency.run(request, app: app, key: key, header: header, writer: writer, refuse: { surface.refusal($0) }) { w in
                    handler(request, .server(app), w)
                }
            }
            handler(request, .server(app), writer)
        }
    }

    /// A writer that carries the call's stamp to the engine and, once the call is answered, sends
    /// its nonce to the log if none of its changes did.
    private static func stamped(_ writer: ResponseWriter, _ accepted: RequestAuthenticator.Accepted, engine: Engine) -> ResponseWriter {
        let stamp = RequestStamp(nonce: RequestNonce(app: accepted.app, nonce: accepted.nonce), nonceField: accepted.nonceField)
        return ResponseWriter(attachment: CallAttachment(stamp: stamp, keeper: nil)) { response in
            engine.finish(stamp)
            writer.send(response)
        }
    }
}

/// A route the signed route groups bind: a native route table entry, or a vendor endpoint.
protocol SignedRoute {
    var method: HTTPMethod { get }
    var path: String { get }
}

extension NativeRoute: SignedRoute {}

extension VendorEndpoint: SignedRoute {
    /// Every vendor call is a POST (SPEC §8).
    var method: HTTPMethod { .POST }
}

/// The routes of one surface, each bound to its handler through the signed-request pipeline with
/// that surface's refusals. A route is named by its table entry (`routes.signed(.createRoom) { … }`)
/// and never by a method and path spelled again; `Router.Builder.add(_:)` registers the group
/// under the surface's name, which is how a test holds the table against what was registered.
struct SignedRoutes<Route: SignedRoute> {
    let surface: RESTSurface
    let pipeline: SignedPipeline
    fileprivate private(set) var bound: [(method: HTTPMethod, path: String, handler: @Sendable (Request, ResponseWriter) -> Void)] = []

    init(_ surface: RESTSurface, pipeline: SignedPipeline) {
        self.surface = surface
        self.pipeline = pipeline
    }

    mutating func signed(_ route: Route, _ handler: @escaping SignedPipeline.Handler) {
        bound.append((route.method, route.path, pipeline.wrap(surface, handler)))
    }
}

extension Router.Builder {
    /// Registers every route of `group`, in the order they were bound.
    mutating func add<Route>(_ group: SignedRoutes<Route>) {
        for route in group.bound { add(route.method, route.path, group: group.surface.name, route.handler) }
    }
}
