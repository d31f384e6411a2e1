import Chat
import Foundation
import Testing
import TestKit
import Wire

/// TR-1 over real sockets: `GET /sse` streams a session's events as Server-Sent Events (chunked),
/// resumes every room gap-free from `Last-Event-ID`, refuses bad cursors and encodings before
/// anything changes, keeps idle streams open with heartbeats, and takes the stream's commands on
/// `POST /client/ops` from its own user only.
extension HardeningTests {
    static let otherApp = (key: "otherapp", secret: "other-secret-123456")

    func sse(_ g: GatewayProcess, _ query: String, token: String, headers: [(String, String)] = []) throws -> EventStreamClient {
        try EventStreamClient(port: g.port, target: "/sse?\(query)", headers: [("Authorization", "Bearer \(token)")] + headers)
    }

    /// Waits until the stream's join of `room` is answered; returns the `hello` data.
    @discardableResult
    func joined(_ s: EventStreamClient, _ room: String) throws -> [String: Any] {
        let (hello, _) = try s.waitFor("hello")
        let (join, _) = try s.waitFor("join") { $0.json["roomId"] as? String == room }
        #expect(join.json["ok"] != nil, "\(join.data)")
        return hello.json
    }

    static func contents(_ events: [EventStreamClient.Event]) -> [String] {
        events.filter { $0.name == "room.message" }.compactMap { $0.json.obj("data").obj("message").str("content") }
    }

    @Test("TR-1: a stream joins by query and gets a REST message with the same JSON a WebSocket gets; after a disconnect, Last-Event-ID resumes exactly the missed ones; another room's and another app's members get none")
    func eventStreamResumesGapFree() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess(extra: ["--app", "\(Self.otherApp.key):\(Self.otherApp.secret)"])
            defer { g.stop() }
            let rest = g.rest()
            let other = RESTClient(port: g.port, appKey: Self.otherApp.key, secret: Self.otherApp.secret)
            for room in ["r", "elsewhere"] { #expect(try rest.call("POST", "/v1/rooms", ["roomId": room]).status == 201) }
            #expect(try other.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let alice = try sse(g, "rooms=r", token: try rest.token("alice"))
            #expect(alice.status == 200)
            #expect(alice.header("Content-Type") == "text/event-stream" && alice.header("Cache-Control") == "no-cache")
            #expect(alice.header("Transfer-Encoding") == "chunked")
            try joined(alice, "r")
            // The token may come as a parameter too; a WebSocket member of the room to compare with.
            let bob = try EventStreamClient(port: g.port, target: "/sse?rooms=elsewhere&token=\(try rest.token("bob"))")
            try joined(bob, "elsewhere")
            let stranger = try sse(g, "rooms=r", token: try other.token("alice"))
            try joined(stranger, "r")
            let ws = try g.client("carol")
            _ = try ws.expectOK(try ws.command("room.join", ["roomId": "r"]))
            _ = ws.drain()

            #expect(try rest.call("POST", "/v1/rooms/r/messages", ["content": "m1"]).status == 201)
            let (m1, _) = try alice.waitFor("room.message")
            let wsM1 = try ws.waitFor("room.message")
            #expect(m1.json.str("ev") == "room.message" && m1.json.int("offset") == wsM1.int("offset") && m1.json.str("epoch") == wsM1.str("epoch"))
            #expect(Self.contents([m1]) == ["m1"])
            let cursor = try #require(alice.lastEventId)

            // The connection drops; two more messages; the reconnect names the last id it saw.
            alice.tcp.shutdown()
            #expect(try rest.call("POST", "/v1/rooms/r/messages", ["content": "m2"]).status == 201)
            #expect(try rest.call("POST", "/v1/rooms/r/messages", ["content": "m3"]).status == 201)
            let again = try sse(g, "rooms=r", token: try rest.token("alice"), headers: [("Last-Event-ID", cursor)])
            let (resume, before) = try again.waitFor("room.resume")
            #expect(Self.contents(before) == ["m2", "m3"], "\(before.map(\.data))")
            #expect(resume.json.obj("data")["resumed"] as? Bool == true && resume.json.obj("data").int("replayed") == 2)
            let offsets = before.filter { $0.name == "room.message" }.compactMap { $0.json.int("offset") }
            // The offsets the WebSocket member saw for them (the stream's quit events between are not hers).
            let wsOffsets = try ["m2", "m3"].map { content in
                try ws.waitFor("room.message") { $0.obj("data").obj("message").str("content") == content }.int("offset")
            }
            #expect(offsets == wsOffsets.compactMap { $0 } && offsets.count == 2)
            // Live again, nothing twice.
            #expect(try rest.call("POST", "/v1/rooms/r/messages", ["content": "m4"]).status == 201)
            let (m4, between) = try again.waitFor("room.message")
            #expect(Self.contents(between + [m4]) == ["m4"])

            // The query parameter form of the cursor resumes as well (nothing missed: resumed, 0 replayed).
            let last = try #require(again.lastEventId)
            let third = try sse(g, "rooms=r&lastEventId=\(last)", token: try rest.token("alice"))
            let (resumed, replayed) = try third.waitFor("room.resume")
            #expect(Self.contents(replayed).isEmpty && resumed.json.obj("data").int("replayed") == 0)

            // Another room's member and another app's member of a room named r got none of it.
            #expect(Self.contents(try bob.drain(for: 0.3)).isEmpty)
            #expect(Self.contents(try stranger.drain(for: 0.3)).isEmpty)
        }
    }

    @Test("TR-1: a Last-Event-ID outside the resume window gets the room.resume refusal a WebSocket gets")
    func eventStreamOutsideTheWindow() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess(extra: ["--resume-events", "2"])
            defer { g.stop() }
            let rest = g.rest()
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let alice = try sse(g, "rooms=r", token: try rest.token("alice"))
            try joined(alice, "r")
            // The join's event carries the room's position in its id.
            let cursor = try #require(alice.lastEventId)
            #expect(try StreamCursor.decode(cursor, app: g.appKey).get().rooms.map(\.roomId) == ["r"])
            let ws = try g.client("carol")
            let joinInfo = try ws.expectOK(try ws.command("room.join", ["roomId": "r"])).obj("joinInfo")
            let position = try #require(joinInfo.int("offset"))
            let epoch = try #require(joinInfo.obj("room").str("epoch"))
            alice.tcp.shutdown()
            ws.ws.tcp.shutdown()
            for i in 0..<5 { #expect(try rest.call("POST", "/v1/rooms/r/messages", ["content": "m\(i)"]).status == 201) }

            let again = try sse(g, "rooms=r", token: try rest.token("alice"), headers: [("Last-Event-ID", cursor)])
            let (refusal, before) = try again.waitFor("room.resume")
            #expect(Self.contents(before).isEmpty)
            let wsAgain = try g.client("carol")
            _ = try wsAgain.expectOK(try wsAgain.command("room.join", ["roomId": "r", "resume": ["epoch": epoch, "stream": ws.stream, "offset": position]]))
            let wsRefusal = try wsAgain.waitFor("room.resume")
            #expect(refusal.json.obj("data")["resumed"] as? Bool == false && refusal.json.obj("data").str("reason") == "outOfWindow")
            #expect(NSDictionary(dictionary: refusal.json.obj("data")) == NSDictionary(dictionary: wsRefusal.obj("data")))
        }
    }

    @Test("TR-1: a malformed Last-Event-ID, another app's cursor and an unknown encoding are refused 400 naming the field, and join nothing")
    func eventStreamRefusals() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess(extra: ["--app", "\(Self.otherApp.key):\(Self.otherApp.secret)"])
            defer { g.stop() }
            let rest = g.rest()
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let token = try rest.token("alice")
            let foreign = StreamCursor(app: Self.otherApp.key, stream: "s", rooms: [.init(roomId: "r", epoch: "e", offset: 1)]).encoded
            let cases: [(query: String, headers: [(String, String)], code: ErrorCode, field: String)] = [
                ("rooms=r", [("Last-Event-ID", "not a cursor!")], .badCursor, "Last-Event-ID"),
                ("rooms=r", [("Last-Event-ID", "AQR0")], .badCursor, "Last-Event-ID"),
                ("rooms=r&lastEventId=AQR0", [], .badCursor, "lastEventId"),
                ("rooms=r", [("Last-Event-ID", foreign)], .badCursor, "Last-Event-ID"),
                ("rooms=r&encoding=xml", [], .badRequest, "encoding"),
            ]
            for c in cases {
                let s = try EventStreamClient(port: g.port, target: "/sse?\(c.query)", headers: [("Authorization", "Bearer \(token)")] + c.headers)
                #expect(s.status == c.code.httpStatus, "\(c)")
                #expect(s.refusal["code"] as? Int == c.code.rawValue && s.refusal["field"] as? String == c.field, "\(c): \(s.refusal)")
                try ErrorTableCheck.restError(status: s.status, json: s.refusal, text: "\(s.refusal)")
            }
            let badToken = try EventStreamClient(port: g.port, target: "/sse?rooms=r", headers: [("Authorization", "Bearer nope")])
            #expect(badToken.status == 401 && badToken.refusal["code"] as? Int == ErrorCode.badToken.rawValue && badToken.refusal["field"] as? String == "token")
            let members = try rest.call("GET", "/v1/rooms/r/members").json["members"] as? [[String: Any]] ?? []
            #expect(members.isEmpty, "\(members)")
        }
    }

    @Test("TR-1: ops go over POST /client/ops with the stream's id and are answered as on a WebSocket; another user's stream id is refused 404 and reaches nothing; heartbeats keep an idle stream open; compact events on request")
    func eventStreamOpsAndHeartbeats() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess(extra: ["--sse-heartbeat", "1"])
            defer { g.stop() }
            let rest = g.rest()
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let aliceToken = try rest.token("alice")
            let alice = try sse(g, "rooms=r", token: aliceToken)
            let stream = try #require(try joined(alice, "r").str("stream"))
            // TR-5: a compact WebSocket member gives the room an alias; the compact stream keeps the
            // room id (streams get no aliases), and its join answer names none.
            let compactSocket = try joined(g, offer: WireEncoding.compact.rawValue, user: "socket", room: "r")
            let watcher = try sse(g, "rooms=r&encoding=compact", token: try rest.token("watcher"))
            let (hello, _) = try watcher.waitFor("hello")
            #expect(hello.json["stream"] != nil)
            let (join, _) = try watcher.waitFor("join") { $0.json["roomId"] as? String == "r" }
            #expect(join.json["ok"] != nil && !join.data.contains("alias"), "\(join.data)")
            _ = try watcher.drain(for: 0.3)

            // Her own op: answered in the body under her id; the room gets the message.
            let sent = try rest.call("POST", "/client/ops", ["id": 9, "op": "room.send", "args": ["roomId": "r", "content": "hi"]],
                                     headers: [("Authorization", "Bearer \(aliceToken)"), ("X-Roomcast-Stream", stream)])
            #expect(sent.status == 200 && sent.json.int("id") == 9 && sent.json.obj("ok").obj("message").str("content") == "hi", "\(sent.text)")
            let (compact, _) = try watcher.waitFor("room.message")
            #expect(compact.data.hasPrefix(#"{"m":"r","o":"#), "\(compact.data)")
            var socketFrame = ""
            while !socketFrame.contains(#""c":"hi""#) {
                if case .text(let t) = try compactSocket.readFrame(timeout: 5) { socketFrame = t }
            }
            #expect(socketFrame.hasPrefix(#"{"m":1,"o":"#), "\(socketFrame)")
            // A command the op table does not know is answered with an error, as on a WebSocket.
            let unknown = try rest.call("POST", "/client/ops?stream=\(stream)", ["id": 10, "op": "room.fly", "args": [:] as [String: Any]],
                                        headers: [("Authorization", "Bearer \(aliceToken)")])
            #expect(unknown.status == 200 && unknown.json.obj("error").int("code") == ErrorCode.badRequest.rawValue)

            // Bob names her stream: refused as if it did not exist, and nothing is sent.
            let bobToken = try rest.token("bob")
            let refused = try rest.call("POST", "/client/ops", ["id": 1, "op": "room.send", "args": ["roomId": "r", "content": "spoofed"]],
                                        headers: [("Authorization", "Bearer \(bobToken)"), ("X-Roomcast-Stream", stream)])
            #expect(refused.status == 404 && refused.json.int("code") == ErrorCode.unknownStream.rawValue && refused.json.str("field") == "stream")
            #expect(try rest.call("POST", "/client/ops", ["id": 1, "op": "room.leave", "args": ["roomId": "r"]],
                                  headers: [("Authorization", "Bearer \(bobToken)"), ("X-Roomcast-Stream", "0-0000")]).status == 404)
            #expect(!(try watcher.drain(for: 0.5)).contains { $0.data.contains("spoofed") })
            let history = try rest.call("GET", "/v1/rooms/r/messages").json["messages"] as? [[String: Any]] ?? []
            #expect(!history.contains { $0.str("content") == "spoofed" })

            // Idle: a heartbeat comment comes within the interval (1 s) and a bit.
            _ = try alice.drain(for: 0.2)
            #expect(try alice.waitForComment(timeout: 3))
            #expect(alice.comments.last == "heartbeat")
        }
    }

    @Test("TR-1: a stream the server closes gets event close with the WebSocket's code and reason first, then its end; the connection takes its next request")
    func eventStreamCloseThenKeepAlive() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess()
            defer { g.stop() }
            let rest = g.rest()
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let alice = try sse(g, "rooms=r", token: try rest.token("alice"))
            try joined(alice, "r")
            let listed = try rest.call("GET", "/v1/users/alice/connections").json["connections"] as? [[String: Any]] ?? []
            #expect(listed.count == 1 && (listed.first?["rooms"] as? [String]) == ["r"], "\(listed)")
            #expect(try rest.call("DELETE", "/v1/users/alice/connections?reason=policy%20violation").status == 200)
            let (close, _) = try alice.waitFor("close")
            #expect(close.json.int("code") == Int(CloseCode.disconnectedByApp.rawValue) && close.json.str("reason") == "policy violation")
            #expect(try alice.next(timeout: 2) == nil && alice.ended)
            // The response ended with its last chunk: the same connection serves the next request.
            try alice.tcp.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(try alice.tcp.readResponse().status == 200)
        }
    }

    @Test("TR-1, QS-3: a stream that does not read while high-priority messages pile up past the bound is closed as a slow consumer: event close 4008 after what it had started to receive")
    func eventStreamSlowConsumer() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess(extra: ["--max-outbound-bytes", "262144"])
            defer { g.stop() }
            let rest = g.rest()
            #expect(try rest.call("PATCH", "/v1/settings", ["clientMessagesPerSecond": 1_000_000, "sendsPerUserPerSecond": 1_000_000,
                                                             "roomMessagesPerSecond": 100_000]).status == 200)
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "busy", "keepAlive": true]).status == 201)
            let slow = try EventStreamClient(port: g.port, target: "/sse?rooms=busy&token=\(try rest.token("slow"))", receiveBuffer: 2048)
            try joined(slow, "busy")
            let sender = try g.client("sender")
            _ = try sender.expectOK(try sender.command("room.join", ["roomId": "busy"]))
            let payload = String(repeating: "x", count: 8000)
            for i in 0..<200 {
                _ = try sender.expectOK(try sender.command("room.send", ["roomId": "busy", "content": "\(i):" + payload, "priority": "high"]))
            }
            // Reading now: what it had started to receive (what the kernel buffers held, and the
            // chunk being written), then the close, then the end of the response.
            var received = 0
            var close: EventStreamClient.Event?
            while close == nil, !slow.ended, let e = try? slow.next(timeout: 8) {
                if e.name == "room.message" { received += 1 }
                if e.name == "close" { close = e }
            }
            #expect(received < 200, "\(received)")
            #expect(close?.json.int("code") == Int(CloseCode.slowConsumer.rawValue) && close?.json.str("reason") == "slow consumer")
            #expect(try slow.next(timeout: 2) == nil)
        }
    }
}
