import Chat
import HTTP1
import Server
import Wire
import Replication

/// A user's connections (PX-5): list them and their rooms, and disconnect them (all, or one
/// device) with a close code and a reason that reach the client. Answered from the domain, which
/// holds every session of every node following the log, and disconnected through the log, each
/// node closing its own.
extension RESTAPI {
    func registerUsers(_ routes: inout SignedRoutes<NativeRoute>) {
        let engine = context.engine
        let nodes = context.role

        routes.signed(.listConnections) { req, caller, writer in
            do throws(ChatError) {
                let user = try Self.user(req)
                engine.query(.connections(app: caller.app, userId: user)) { result in
                    guard case .success(.connections(let list)) = result else { return writer.send(Self.respond(result)) }
                    // Each connection's node, by the node run in its session id (CL-5's membership).
                    let urls = nodes.urlsByRun()
                    writer.send(.json(.ok, Self.connections(user: user, list.sorted { ($0.since, $0.session) < ($1.since, $1.session) }.map {
                        (sessionId: String($0.session.raw), device: $0.device, node: urls[$0.session.incarnation] ?? "", since: $0.since, rooms: $0.rooms)
                    })))
                }
            } catch {
                writer.send(Self.error(error))
            }
        }

        routes.signed(.userRooms) { req, caller, writer in
            do throws(ChatError) {
                let user = try Self.user(req)
                engine.query(.connections(app: caller.app, userId: user)) { result in
                    guard case .success(.connections(let list)) = result else { return writer.send(Self.respond(result)) }
                    writer.send(.json(.ok, JSONWriter.object { w in w.field("roomIds", Set(list.flatMap(\.rooms)).sorted()) }))
                }
            } catch {
                writer.send(Self.error(error))
            }
        }

        // PX-3: who is online.
        routes.signed(.userPresence) { req, caller, writer in
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
        }
        routes.signed(.queryPresence) { req, caller, writer in
            do throws(ChatError) {
                let body = try decodeBody(PresenceQueryRequest.self, from: req.body)
                engine.query(.online(app: caller.app, body.userIds)) { writer.send(Self.respond($0)) }
            } catch {
                writer.send(Self.error(error))
            }
        }

        routes.signed(.disconnectUser) { req, caller, writer in
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
                // Through the log: every node closes its own matching connections, and the count
                // is the domain's (its sessions when the record is applied).
                let d = UserDisconnect(app: caller.app, userId: user, device: device, closeCode: code.rawValue, reason: reason)
                engine.disconnectUser(d, stamp: writer.stamp, replyTo: .answer(writer) { result in
                    guard case .success(.disconnected(let n)) = result else { return Self.respond(result) }
                    return .json(.ok, JSONWriter.object { w in
                        w.field("disconnected", n)
                        w.field("closeCode", Int(code.rawValue))
                    })
                })
            } catch {
                writer.send(Self.error(error))
            }
        }
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
