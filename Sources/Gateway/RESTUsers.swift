import Chat
import HTTP1
import Server
import Wire

/// A user's connections (PX-5): list them and their rooms, and disconnect them (all, or one
/// device) with a close code and a reason that reach the client. Answered from every I/O loop's
/// hub, where the connections live.
extension RESTAPI {
    func registerUsers(_ r: inout Router.Builder) {
        let hubs = context.hubs
        let node = context.nodeURLs

        r.add(.GET, "/v1/users/{userId}/connections", signed { req, caller, writer in
            do throws(ChatError) {
                let user = try Self.user(req)
                let app = caller.app
                hubs.gather({ $0.connections(app: app, user: user) }) { found in
                    let list = found.flatMap { $0 }.sorted { $0.since < $1.since }
                    let url = node.value.first ?? ""
                    writer.send(.json(.ok, JSONWriter.object { w in
                        w.field("userId", user)
                        w.key("connections")
                        w.beginArray()
                        for c in list {
                            w.beginObject()
                            w.field("sessionId", c.sessionId)
                            w.field("device", c.device)
                            w.field("node", url)
                            w.field("since", c.since)
                            w.field("rooms", c.rooms)
                            w.endObject()
                        }
                        w.endArray()
                    }))
                }
            } catch {
                writer.send(Self.error(error))
            }
        })

        r.add(.GET, "/v1/users/{userId}/rooms", signed { req, caller, writer in
            do throws(ChatError) {
                let user = try Self.user(req)
                let app = caller.app
                hubs.gather({ $0.connections(app: app, user: user) }) { found in
                    let rooms = Set(found.flatMap { $0.flatMap(\.rooms) }).sorted()
                    writer.send(.json(.ok, JSONWriter.object { w in w.field("roomIds", rooms) }))
                }
            } catch {
                writer.send(Self.error(error))
            }
        })

        // PX-3: who is online.
        let engine = context.engine
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

        let inCluster = context.inCluster
        r.add(.DELETE, "/v1/users/{userId}/connections", signed { req, caller, writer in
            // A node reaches its own connections only: refused rather than done on one node of many.
            if inCluster {
                return writer.send(Self.error(GatewayError(.notOnClusterNodes,
                    "in a cluster, a node can disconnect only its own connections; this call is not available on cluster nodes yet")))
            }
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

    static func user(_ req: Request) throws(ChatError) -> String {
        let user = param(req, "userId")
        try Validate.identifier(user, field: "userId", maxBytes: Limits.maxUserIdBytes)
        return user
    }
}
