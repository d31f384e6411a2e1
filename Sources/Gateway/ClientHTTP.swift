import Chat
import Engine
import HTTP1
import Reactor
import Server
import Wire

/// TR-1, TR-2: the client protocol over plain HTTP, for clients that cannot hold a WebSocket:
/// `GET /sse` (Server-Sent Events), `GET /poll` (long-polling) and `POST /client/ops` (their
/// commands). Each is authenticated by the client token, checked as `connect` checks it
/// (`ClientSession.verify`), and each session is a `ClientSession` with an HTTP transport
/// (`ClientStream`), on the loop the stream was opened on.
struct ClientHTTPRoutes: Sendable {
    let context: GatewayContext
    /// TR-2: what a poll session holds for its client at most (a connection's output bound).
    let pollBufferBytes: Int

    func register(_ routes: inout Router.Builder) {
        let me = self
        routes.add(.GET, "/sse", local: { Self.crossOrigin($0, $1, me.openEventStream) })
        routes.add(.GET, "/poll", local: { Self.crossOrigin($0, $1, me.poll) })
        routes.add(.POST, "/client/ops", local: { Self.crossOrigin($0, $1, me.op) })
        for path in ["/sse", "/poll", "/client/ops"] { routes.add(.OPTIONS, path, sync: Self.preflight) }
    }

    // MARK: Pages on another origin

    /// An app's pages usually live on their own origin: a browser lets them read these answers
    /// when the answer names their Origin. A request whose Origin the token's app does not allow
    /// is refused (`authenticate`), so every answer may name it.
    static func crossOrigin(_ r: Request, _ route: LocalRoute, _ handle: (Request, LocalRoute) -> LocalAnswer) -> LocalAnswer {
        guard let origin = r.head.headers["origin"] else { return handle(r, route) }
        let writer = route.writer
        let named = LocalRoute(loopIndex: route.loopIndex, writer: ResponseWriter { writer.send(allowing(origin, $0)) })
        switch handle(r, named) {
        case .respond(let response): return .respond(allowing(origin, response))
        case .later: return .later
        case .stream(let status, var headers, let handler):
            headers.add("Access-Control-Allow-Origin", origin)
            headers.add("Vary", "Origin")
            return .stream(status: status, headers: headers, handler: handler)
        }
    }

    static func allowing(_ origin: String, _ response: Response) -> Response {
        var r = response
        r.headers.add("Access-Control-Allow-Origin", origin)
        r.headers.add("Vary", "Origin")
        return r
    }

    /// The CORS preflight of a request with a token header (or a JSON body).
    static func preflight(_ r: Request) -> Response {
        var h = HTTPHeaders()
        if let origin = r.head.headers["origin"] {
            h.add("Access-Control-Allow-Origin", origin)
            h.add("Vary", "Origin")
        }
        h.add("Access-Control-Allow-Methods", "GET, POST")
        h.add("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID, X-Roomcast-Stream")
        h.add("Access-Control-Max-Age", "600")
        return Response(status: .noContent, headers: h)
    }

    // MARK: Opening

    /// What opening a stream asks for, checked.
    struct Opening {
        let token: String
        let claims: TokenClaims
        let encoding: WireEncoding
        let rooms: [String]
        let cursor: StreamCursor?

        /// The cursor's positions of the rooms being joined (they are resumed).
        var resuming: [StreamCursor.Room] { cursor?.rooms.filter { rooms.contains($0.roomId) } ?? [] }
    }

    /// A refusal, answered as it is.
    struct Refused: Error {
        let response: Response
        init(_ response: Response) { self.response = response }
    }

    static func refuse(_ code: ErrorCode, _ message: String, field: String?) -> Response {
        RESTAPI.error(GatewayError(code, message, field: field))
    }

    /// The client's token and its claims: `Authorization: Bearer`, or the `token` parameter.
    func authenticate(_ r: Request) -> Result<(token: String, claims: TokenClaims), Refused> {
        guard context.caughtUp.isReady else { return .failure(Refused(Self.refuse(.unavailable, "starting", field: nil))) }
        var token = r.query("token")
        if let authorization = r.head.headers["authorization"], authorization.lowercased().hasPrefix("bearer ") {
            token = String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        }
        guard let token, !token.isEmpty else {
            return .failure(Refused(Self.refuse(.badToken, "a client token is needed (Authorization: Bearer, or the token parameter)", field: "token")))
        }
        switch ClientSession.verify(token: token, context: context, now: context.clock()) {
        case .failure(let refusal):
            return .failure(Refused(RESTAPI.error(refusal.error)))
        case .success(let claims):
            // A browser's page must be on the app's allowlist, as for a WebSocket.
            guard ClientSession.originAllowed(r.head.headers["origin"], app: claims.app, context: context) else {
                return .failure(Refused(Self.refuse(.originForbidden, "origin not allowed", field: "Origin")))
            }
            return .success((token, claims))
        }
    }

    /// A cursor from one of `fields` (header or parameter name, and whether it is a header).
    func cursor(_ r: Request, app: String, fields: [(name: String, header: Bool)]) -> Result<StreamCursor?, Refused> {
        for f in fields {
            let value: String? = f.header ? r.head.headers[f.name] : r.query(f.name)
            guard let text = value else { continue }
            switch StreamCursor.decode(text, app: app) {
            case .failure(let refusal): return .failure(Refused(Self.refuse(.badCursor, refusal.message, field: f.name)))
            case .success(let c): return .success(c)
            }
        }
        return .success(nil)
    }

    func opening(_ r: Request, cursorFields: [(name: String, header: Bool)]) -> Result<Opening, Refused> {
        // PX-1: a new session counts as a new connection does.
        guard context.connects.take(r.peer.host, now: context.clock()) else {
            var refusal = RESTAPI.error(ChatError(.rateLimited, "too many new connections from this address", field: nil))
            if refusal.headers["Retry-After"] == nil { refusal.headers.add("Retry-After", String(Limits.rateLimitRetryAfterSeconds)) }
            return .failure(Refused(refusal))
        }
        let auth: (token: String, claims: TokenClaims)
        switch authenticate(r) {
        case .failure(let refused): return .failure(refused)
        case .success(let a): auth = a
        }
        let encoding: WireEncoding
        switch r.query("encoding") {
        case nil, "json": encoding = .json
        case "compact": encoding = .compact
        case let other?: return .failure(Refused(Self.refuse(.badRequest, "encoding is json or compact, not \(other)", field: "encoding")))
        }
        let cursor: StreamCursor?
        switch self.cursor(r, app: auth.claims.app, fields: cursorFields) {
        case .failure(let refused): return .failure(refused)
        case .success(let c): cursor = c
        }
        var rooms: [String] = []
        let named = r.query("rooms").map { $0.split(separator: ",").map { String($0) } } ?? cursor?.rooms.map(\.roomId) ?? []
        for roomId in named where !rooms.contains(roomId) {
            do {
                try Validate.identifier(roomId, field: "rooms", maxBytes: Limits.maxRoomIdBytes)
            } catch {
                return .failure(Refused(RESTAPI.error(error)))
            }
            rooms.append(roomId)
        }
        guard rooms.count <= Limits.maxStreamRooms else {
            return .failure(Refused(Self.refuse(.invalidParameter, "a stream joins at most \(Limits.maxStreamRooms) rooms", field: "rooms")))
        }
        return .success(Opening(token: auth.token, claims: auth.claims, encoding: encoding, rooms: rooms, cursor: cursor))
    }

    // MARK: Routes

    /// `GET /sse`: a Server-Sent Events stream of a new session (TR-1).
    func openEventStream(_ r: Request, _ route: LocalRoute) -> LocalAnswer {
        let o: Opening
        switch opening(r, cursorFields: [("Last-Event-ID", true), ("lastEventId", false)]) {
        case .failure(let refused): return .respond(refused.response)
        case .success(let opening): o = opening
        }
        guard let hub = context.hubs.hub(route.loopIndex) else { return .respond(Self.refuse(.unavailable, "starting", field: nil)) }
        if r.method == .HEAD { return .respond(Response(status: .ok, headers: HTTPHeaders(EventStreamTransport.headers))) }
        let session = ClientSession(hub: hub, origin: r.head.headers["origin"], now: context.clock(), encoding: o.encoding)
        let stream = EventStreamTransport(id: ClientStream.makeID(loop: route.loopIndex), session: session, hub: hub, claims: o.claims,
                                          resuming: o.resuming)
        stream.prepare(token: o.token, rooms: o.rooms, from: o.cursor)
        return .stream(status: .ok, headers: HTTPHeaders(EventStreamTransport.headers), handler: stream)
    }

    /// `GET /poll`: a new long-poll session's first poll, or (`stream`) the next poll of one (TR-2).
    func poll(_ r: Request, _ route: LocalRoute) -> LocalAnswer {
        // (A HEAD opens nothing.)
        if r.method == .HEAD { return .respond(Response.json(.ok, [UInt8]())) }
        var wait = Limits.defaultPollWaitSeconds
        if let w = r.query("wait") {
            // Digits only (the request head bounds how many); more than the bound is taken as the bound.
            guard !w.isEmpty, w.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
                return .respond(Self.refuse(.invalidParameter, "wait is a whole number of seconds (at most \(Limits.maxPollWaitSeconds))", field: "wait"))
            }
            wait = min(Int(w) ?? Limits.maxPollWaitSeconds, Limits.maxPollWaitSeconds)
        }
        if let id = r.query("stream") {
            let claims: TokenClaims
            switch authenticate(r) {
            case .failure(let refused): return .respond(refused.response)
            case .success(let a): claims = a.claims
            }
            let cursor: StreamCursor?
            switch self.cursor(r, app: claims.app, fields: [("cursor", false)]) {
            case .failure(let refused): return .respond(refused.response)
            case .success(let c): cursor = c
            }
            let writer = route.writer
            let seconds = wait
            return onStreamLoop(id, claims: claims, writer: writer) { stream in
                guard let poll = stream as? PollTransport else {
                    writer.send(Self.refuse(.unknownStream, "stream \(id) is not a poll session", field: "stream"))
                    return
                }
                poll.poll(acknowledged: cursor?.sequence, wait: seconds, writer: writer)
            }
        }
        let o: Opening
        switch opening(r, cursorFields: [("cursor", false)]) {
        case .failure(let refused): return .respond(refused.response)
        case .success(let opening): o = opening
        }
        guard let hub = context.hubs.hub(route.loopIndex) else { return .respond(Self.refuse(.unavailable, "starting", field: nil)) }
        let session = ClientSession(hub: hub, origin: r.head.headers["origin"], now: context.clock(), encoding: o.encoding)
        let stream = PollTransport(id: ClientStream.makeID(loop: route.loopIndex), session: session, hub: hub, claims: o.claims,
                                   resuming: o.resuming, bound: pollBufferBytes)
        stream.start(token: o.token, rooms: o.rooms, from: o.cursor)
        stream.poll(acknowledged: nil, wait: wait, writer: route.writer)
        return .later
    }

    /// `POST /client/ops`: one command of an event stream's or poll session's client, answered in
    /// the response body as a WebSocket's answer (TR-1, TR-2).
    func op(_ r: Request, _ route: LocalRoute) -> LocalAnswer {
        let claims: TokenClaims
        switch authenticate(r) {
        case .failure(let refused): return .respond(refused.response)
        case .success(let a): claims = a.claims
        }
        guard let id = r.head.headers["x-roomcast-stream"] ?? r.query("stream") else {
            return .respond(Self.refuse(.invalidParameter, "name the stream (X-Roomcast-Stream, or the stream parameter)", field: "stream"))
        }
        let body = r.body
        let writer = route.writer
        return onStreamLoop(id, claims: claims, writer: writer) { $0.submit(op: body, writer: writer) }
    }

    /// Runs `body` with stream `id` on its loop, if it is the claims' app's and user's; otherwise
    /// answers 404 (`unknownStream`): another user's stream is not told apart from none. (A poll
    /// session that closed is still there until a poll has taken its last events, its `close`
    /// among them; an op to it is refused by the stream.)
    private func onStreamLoop(_ id: String, claims: TokenClaims, writer: ResponseWriter,
                              _ body: @escaping @Sendable (ClientStream) -> Void) -> LocalAnswer {
        let unknown = Self.refuse(.unknownStream, "no stream \(id) is open for this user", field: "stream")
        guard let index = ClientStream.loop(of: id), let bound = context.hubs.bound(index) else { return .respond(unknown) }
        let run: @Sendable () -> Void = {
            guard let stream = bound.value.clientStreams[id], stream.app == claims.app, stream.userId == claims.sub else {
                writer.send(unknown)
                return
            }
            body(stream)
        }
        bound.loop.execute(run)
        return .later
    }
}
