import Chat
import HTTP1
import Server
import Wire
import Replication

/// A user's connections (PX-5): list them and their rooms, and disconnect them (all, or one
/// device) with a close code and a reason that reach the client. Answered from every I/O loop's
/// hub, where the connections live; in a cluster, from the domain, which holds every node's
/// sessions, and disconnected through the shared log, each node closing its own.
extension RESTAPI {
    func registerUsers(_ r: inout Router.Builder) {
        let hubs = context.hubs
        let node = context.nodeURLs
        let engine = context.engine
        let cluster = context.cluster

        r.add(.GET, "/v1/users/{userId}/connections", signed { req, caller, writer in
            do throws(ChatError) {
                let user = try Self.user(req)
                let app = caller.app
                if let cluster {
                    return engine.query(.connections(app: app, userId: user)) { result in
                        guard case .success(.connections(let list)) = result else { return writer.send(Self.respond(result)) }
                        // Each connection's node, by the node run in its session id (CL-5's membership).
                        let own = UInt64(cluster.incarnation)
                        let ownURL = node.value.first ?? ""
                        var urls: [UInt64: String] = [:]
                        for m in cluster.snapshot.members { urls[UInt64(m.incarnation)] = m.urls.first ?? "" }
                        writer.send(.json(.ok, Self.connections(user: user, list.sorted { ($0.since, $0.session) < ($1.since, $1.session) }.map {
                            (sessionId: String($0.session.raw), device: $0.device,
                             node: $0.session.incarnation == own ? ownURL : urls[$0.session.incarnation] ?? "", since: $0.since, rooms: $0.rooms)
                        })))
                    }
                }
                hubs.gather({ $0.connections(app: app, user: user) }) { found in
                    let list = found.flatMap { $0 }.sorted { $0.since < $1.since }
                    let url = node.value.first ?? ""
                    writer.send(.json(.ok, Self.connections(user: user, list.map {
                        (sessionId: $0.sessionId, device: $0.device, node: url, since: $0.since, rooms: $0.rooms)
                    })))
                }
            } catch {
                writer.send(Self.error(error))
            }
        })

        r.add(.GET, "/v1/users/{userId}/rooms", signed { req, caller, writer in
            do throws(ChatError) {
                let user = try Self.user(req)
                let app = caller.app
                if cluster != nil {
                    return engine.query(.connections(app: app, userId: user)) { result in
                        guard case .success(.connections(let list)) = result else { return writer.send(Self.respond(result)) }
                        writer.send(.json(.ok, JSONWriter.object { w in w.field("roomIds", Set(list.flatMap(\.rooms)).sorted()) }))
                    }
                }
                hubs.gather({ $0.connections(app: app, user: user) }) { found in
                    let rooms = Set(found.flatMap { $0.flatMap(\.rooms) }).sorted()
                    writer.send(.json(.ok, JSONWriter.object { w in w.field("roomIds", rooms) }))
                }
            } catch {
                writer.send(Self.error(error))
            }
        })

        // PX-3: who is online.
        r.add(.GET, "/v1/users/{userId}/presence", signed { req, caller, writer in
            do throws(ChatError) {
                let user = try Self.user(req)
                engine.query(.online(app: caller.app, [user])) { result in
                    guard case .success(.online(let list)) = result, let p = list.first else { return writer.send(Self.respond(result)) }
                    writer.send(.json(.ok, JSONWriter.object { w in
                        w.field("userId", p.userId)
                        w.field("online", p.connections > 0)
                        w.field("connections", p.connections)
                    }))
                }
            } catch {
                writer.send(Self.error(error))
            }
        })
        r.add(.POST, "/v1/users/presence/query", signed { req, caller, writer in
            do throws(ChatError) {
                let body = try decodeBody(PresenceQueryRequest.self, from: req.body)
                engine.query(.online(app: caller.app, body.userIds)) { writer.send(Self.respond($0)) }
            } catch {
                writer.send(Self.error(error))
            }
        })

        r.add(.DELETE, "/v1/users/{userId}/connections", signed { req, caller, writer in
            do throws(ChatError) {
                let user = try Self.user(req)
                let q = Self.query(req)
                let device = q.string("device")
                if let device {
                    try Validate.identifier(device, field: "device", maxBytes: Limits.maxUserIdBytes)
                }
                let reason = q.string("reason") ?? "disconnected by the app server"
                guard reason.utf8.count <= Limits.maxDisconnectReasonBytes else {
                    throw ChatError(.invalidParameter, "reason is at most \(Limits.maxDisconnectReasonBytes) bytes", field: "reason")
                }
                let code: CloseCode = try q.bool("reconnect") == true ? .disconnectedByAppReconnect : .disconnectedByApp
                let app = caller.app
                if cluster != nil {
                    // Through the shared log: every node closes its own matching connections, and
                    // the count is the cluster's (the domain's sessions when the record is applied).
                    let d = UserDisconnect(app: app, userId: user, device: device, closeCode: code.rawValue, reason: reason)
                    return engine.disconnectUser(d, stamp: writer.stamp, replyTo: .answer(writer) { result in
                        guard case .success(.disconnected(let n)) = result else { return Self.respond(result) }
                        return .json(.ok, JSONWriter.object { w in
                            w.field("disconnected", n)
                            w.field("closeCode", Int(code.rawValue))
                        })
                    })
                }
                hubs.gather({ $0.disconnect(app: app, user: user, device: device, code: code, reason: reason) }) { counts in
                    writer.send(.json(.ok, JSONWriter.object { w in
                        w.field("disconnected", counts.reduce(0, +))
                        w.field("closeCode", Int(code.rawValue))
                    }))
                }
            } catch {
                writer.send(Self.error(error))
            }
        })
    }

    /// The body of `GET /v1/users/{userId}/connections`.
    static func connections(user: String, _ list: [(sessionId: String, device: String, node: String, since: Int64, rooms: [String])]) -> [UInt8] {
        JSONWriter.object { w in
            w.field("userId", user)
            w.key("connections")
            w.beginArray()
            for c in list {
                w.beginObject()
                w.field("sessionId", c.sessionId)
                w.field("device", c.device)
                w.field("node", c.node)
                w.field("since", c.since)
                w.field("rooms", c.rooms)
                w.endObject()
            }
            w.endArray()
        }
    }

    static func user(_ req: Request) throws(ChatError) -> String {
        let user = param(req, "userId")
        try Validate.identifier(user, field: "userId", maxBytes: Limits.maxUserIdBytes)
        return user
    }
}
