import Chat
import Foundation
import Testing
import TestKit
import Wire

/// TR-2: long-polling, in-process: a poll session's events wait for its polls, each poll
/// acknowledges what the last one gave by its cursor and gets what came since, or waits for it up
/// to its `wait`; bad cursors are refused before anything changes, and a session no poll reaches
/// is dropped.
@Suite("Long-polling (TR-2)")
struct LongPollTests {
    typealias Poll = (stream: String, cursor: String, events: [[String: Any]])

    static func poll(_ g: InProcessGateway, _ query: String, token: String) throws -> RESTClient.Response {
        try g.rest().call("GET", "/poll?\(query)", headers: [("Authorization", "Bearer \(token)")])
    }

    static func taken(_ r: RESTClient.Response) throws -> Poll {
        #expect(r.status == 200, "\(r.text)")
        return (try #require(r.json.str("stream")), try #require(r.json.str("cursor")), r.json["events"] as? [[String: Any]] ?? [])
    }

    /// Opens a session joining `rooms` and polls until every join is answered; returns the stream
    /// and the cursor that acknowledges everything so far.
    static func open(_ g: InProcessGateway, token: String, rooms: String) throws -> (stream: String, cursor: String) {
        var p = try taken(try poll(g, "rooms=\(rooms)&wait=0", token: token))
        var joins = p.events.filter { $0.str("event") == "join" }.count
        let wanted = rooms.split(separator: ",").count
        var rounds = 0
        while joins < wanted {
            g.settle()
            p = try taken(try poll(g, "stream=\(p.stream)&cursor=\(p.cursor)&wait=1", token: token))
            joins += p.events.filter { $0.str("event") == "join" }.count
            rounds += 1
            #expect(rounds < 20)
            if rounds >= 20 { break }
        }
        return (p.stream, p.cursor)
    }

    static func contents(_ events: [[String: Any]]) -> [String] {
        events.filter { $0.str("event") == "room.message" }.compactMap { $0.obj("data").obj("data").obj("message").str("content") }
    }

    @Test("TR-2: a poll returns the events since its cursor, each with its cursor, nothing twice; ops and polls of another user's session are refused 404")
    func pollReturnsEventsSinceItsCursor() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        let token = try rest.token("alice")
        let (stream, cursor) = try Self.open(g, token: token, rooms: "r")
        for i in 1...2 { #expect(try rest.call("POST", "/v1/rooms/r/messages", ["content": "m\(i)"]).status == 201) }
        g.settle()
        // A wait past the bound, however many digits it has, is the bound (and events waiting
        // answer at once).
        let first = try Self.taken(try Self.poll(g, "stream=\(stream)&cursor=\(cursor)&wait=99999999999999999999", token: token))
        #expect(Self.contents(first.events) == ["m1", "m2"])
        // Each event has its own cursor; the last is the answer's.
        let cursors = first.events.compactMap { $0.str("cursor") }
        #expect(cursors.count == first.events.count && Set(cursors).count == cursors.count && cursors.last == first.cursor)
        let decoded = try StreamCursor.decode(first.cursor, app: g.appKey).get()
        #expect(decoded.rooms.map(\.roomId) == ["r"] && decoded.rooms[0].offset == first.events.last?.obj("data").int("offset").map(Int64.init))
        // Acknowledged: the next poll has nothing.
        let second = try Self.taken(try Self.poll(g, "stream=\(stream)&cursor=\(first.cursor)&wait=0", token: token))
        #expect(second.events.isEmpty)

        // Her ops go through the same POST /client/ops.
        let sent = try rest.call("POST", "/client/ops", ["id": 3, "op": "room.info", "args": ["roomId": "r"]],
                                 headers: [("Authorization", "Bearer \(token)"), ("X-Roomcast-Stream", stream)])
        #expect(sent.status == 200 && sent.json.int("id") == 3 && sent.json.obj("ok").obj("room").str("roomId") == "r", "\(sent.text)")
        // Another user, or the same user id of another app, reaches nothing.
        let bob = try rest.token("bob")
        let stranger = try g.rest(app: InProcessGateway.otherApp.key, secret: InProcessGateway.otherApp.secret).token("alice")
        for other in [bob, stranger] {
            let polled = try Self.poll(g, "stream=\(stream)&wait=0", token: other)
            #expect(polled.status == 404 && polled.json.int("code") == ErrorCode.unknownStream.rawValue && polled.json.str("field") == "stream")
            let op = try rest.call("POST", "/client/ops?stream=\(stream)", ["id": 1, "op": "room.send", "args": ["roomId": "r", "content": "spoofed"]],
                                   headers: [("Authorization", "Bearer \(other)")])
            #expect(op.status == 404 && op.json.int("code") == ErrorCode.unknownStream.rawValue)
        }
        g.settle()
        let history = try rest.call("GET", "/v1/rooms/r/messages").json["messages"] as? [[String: Any]] ?? []
        #expect(!history.contains { $0.str("content") == "spoofed" })
        // Her session kept its events for her.
        let third = try Self.taken(try Self.poll(g, "stream=\(stream)&cursor=\(second.cursor)&wait=0", token: token))
        #expect(third.events.isEmpty)
    }

    @Test("TR-2: a waiting poll is answered when a message arrives; an idle one answers an empty list after its wait")
    func waitingPolls() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        let token = try rest.token("alice")
        let (stream, cursor) = try Self.open(g, token: token, rooms: "r")

        let answer = Handoff<[String]>()
        let started = Date()
        Thread.detachNewThread {
            let r = try? Self.poll(g, "stream=\(stream)&cursor=\(cursor)&wait=20", token: token)
            answer.put(Self.contents(r?.json["events"] as? [[String: Any]] ?? []))
        }
        Thread.sleep(forTimeInterval: 0.3)
        #expect(try rest.call("POST", "/v1/rooms/r/messages", ["content": "while waiting"]).status == 201)
        #expect(answer.take(timeout: 10) == ["while waiting"])
        #expect(Date().timeIntervalSince(started) < 10)

        let idleStart = Date()
        let later = try Self.taken(try Self.poll(g, "stream=\(stream)&wait=1", token: token))
        // Unacknowledged, the message is still there; acknowledged, the wait runs out empty.
        #expect(Self.contents(later.events) == ["while waiting"])
        let idle = try Self.taken(try Self.poll(g, "stream=\(stream)&cursor=\(later.cursor)&wait=1", token: token))
        #expect(idle.events.isEmpty)
        #expect(Date().timeIntervalSince(idleStart) >= 0.9)
    }

    @Test("TR-2: bad cursors (malformed, another app's) and waits are refused 400 naming the field and change nothing; a session no poll reaches is dropped")
    func refusalsAndExpiry() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        let token = try rest.token("alice")
        let foreign = StreamCursor(app: InProcessGateway.otherApp.key, stream: "s", rooms: []).encoded
        for query in ["rooms=r&cursor=garbage!", "rooms=r&cursor=\(foreign)", "rooms=r&cursor=AQR0"] {
            let r = try Self.poll(g, query, token: token)
            #expect(r.status == 400 && r.json.int("code") == ErrorCode.badCursor.rawValue && r.json.str("field") == "cursor", "\(query): \(r.text)")
        }
        g.settle()
        var members = try rest.call("GET", "/v1/rooms/r/members").json["members"] as? [[String: Any]] ?? []
        #expect(members.isEmpty)

        let (stream, _) = try Self.open(g, token: token, rooms: "r")
        for query in ["stream=\(stream)&cursor=\(foreign)", "stream=\(stream)&cursor=AA"] {
            let r = try Self.poll(g, query, token: token)
            #expect(r.status == 400 && r.json.int("code") == ErrorCode.badCursor.rawValue && r.json.str("field") == "cursor", "\(r.text)")
        }
        for wait in ["-1", "soon", "", "1.5"] {
            let r = try Self.poll(g, "stream=\(stream)&wait=\(wait)", token: token)
            #expect(r.status == 400 && r.json.int("code") == ErrorCode.invalidParameter.rawValue && r.json.str("field") == "wait")
        }
        members = try rest.call("GET", "/v1/rooms/r/members").json["members"] as? [[String: Any]] ?? []
        #expect(members.count == 1)

        // No poll for the timeout: the session is gone, and so is its membership.
        g.advance(seconds: Int64(Limits.pollSessionTimeoutSeconds) + 1)
        let gone = try Self.poll(g, "stream=\(stream)&wait=0", token: try rest.token("alice"))
        #expect(gone.status == 404 && gone.json.int("code") == ErrorCode.unknownStream.rawValue)
        g.settle()
        members = try rest.call("GET", "/v1/rooms/r/members").json["members"] as? [[String: Any]] ?? []
        #expect(members.isEmpty, "\(members)")
    }

    @Test("TR-2: a session its client does not drain loses normal messages past the drop mark and is told with room.gap; past the bound it is closed as a slow consumer (4008), the close its last event")
    func boundsDropsAndClose() throws {
        let g = try InProcessGateway {
            $0.outboundSoftBytes = 2048
            $0.pollBufferBytes = 8192
        }
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        let token = try rest.token("alice")
        let (stream, cursor) = try Self.open(g, token: token, rooms: "r")
        for i in 0..<20 { #expect(try rest.call("POST", "/v1/rooms/r/messages", ["content": "normal \(i)"]).status == 201) }
        g.settle()
        let behind = try Self.taken(try Self.poll(g, "stream=\(stream)&cursor=\(cursor)&wait=0", token: token))
        let kept = Self.contents(behind.events)
        #expect(!kept.isEmpty && kept.count < 20 && kept == (0..<kept.count).map { "normal \($0)" }, "\(kept)")
        // Acknowledged, the session has room again: the gap comes at the next tick, counting the rest.
        _ = try Self.taken(try Self.poll(g, "stream=\(stream)&cursor=\(behind.cursor)&wait=0", token: token))
        g.advance(seconds: 1)
        let told = try Self.taken(try Self.poll(g, "stream=\(stream)&cursor=\(behind.cursor)&wait=0", token: token))
        let gap = try #require(told.events.first { $0.str("event") == "room.gap" })
        #expect(gap.obj("data").obj("data").obj("dropped").int("normal") == 20 - kept.count, "\(gap)")

        // High-priority messages are never dropped: past the bound the session is closed.
        for i in 0..<40 { #expect(try rest.call("POST", "/v1/rooms/r/messages", ["content": "high \(i)", "priority": "high"]).status == 201) }
        g.settle()
        let last = try Self.taken(try Self.poll(g, "stream=\(stream)&cursor=\(told.cursor)&wait=0", token: token))
        #expect(last.events.map { $0.str("event") } == ["close"], "\(last.events.map { $0.str("event") ?? "" })")
        #expect(last.events.last?.obj("data").int("code") == Int(CloseCode.slowConsumer.rawValue))
        // Then it is gone.
        let gone = try Self.poll(g, "stream=\(stream)&wait=0", token: token)
        #expect(gone.status == 404)
    }

    @Test("TR-1, TR-2: pages on another origin may read the answers (their Origin is named, a preflight is answered); an Origin off the app's allowlist is refused 403")
    func crossOriginPages() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        #expect(try rest.call("PATCH", "/v1/settings", ["allowedOrigins": ["https://app.example"]]).status == 200)
        let token = try rest.token("alice")
        let page = try rest.call("GET", "/poll?rooms=r&wait=0", headers: [("Authorization", "Bearer \(token)"), ("Origin", "https://app.example")])
        #expect(page.status == 200 && page.header("Access-Control-Allow-Origin") == "https://app.example" && page.header("Vary") == "Origin")
        let stream = try #require(page.json.str("stream"))
        let op = try rest.call("POST", "/client/ops?stream=\(stream)", ["id": 1, "op": "room.info", "args": ["roomId": "r"]],
                               headers: [("Authorization", "Bearer \(token)"), ("Origin", "https://app.example")])
        #expect(op.header("Access-Control-Allow-Origin") == "https://app.example")
        let preflight = try rest.call("OPTIONS", "/client/ops", headers: [("Origin", "https://app.example"), ("Access-Control-Request-Method", "POST")])
        #expect(preflight.status == 204 && preflight.header("Access-Control-Allow-Origin") == "https://app.example")
        #expect(preflight.header("Access-Control-Allow-Headers")?.contains("X-Roomcast-Stream") == true)
        for path in ["/poll?rooms=r&wait=0", "/poll?stream=\(stream)&wait=0"] {
            let refused = try rest.call("GET", path, headers: [("Authorization", "Bearer \(token)"), ("Origin", "https://evil.example")])
            #expect(refused.status == 403 && refused.json.int("code") == ErrorCode.originForbidden.rawValue && refused.json.str("field") == "Origin")
        }
    }
}
