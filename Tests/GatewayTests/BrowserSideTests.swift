import Chat
import Foundation
@testable import Gateway
import Testing
import TestKit
import Wire

/// What the browser side needs from the server (BX-3, BX-4, PX-5): the observer capability the
/// console watches rooms with, the join answer's stream position the client library resumes
/// from, the room directory, the served files, and the counters the console charts.
@Suite("Browser side: observers, join positions, directory, assets")
struct BrowserSideTests {
    func ok(_ c: SessionClient, _ op: String, _ args: [String: Any] = [:]) throws -> [String: Any] {
        try c.expectOK(try c.command(op, args))
    }

    func error(_ c: SessionClient, _ op: String, _ args: [String: Any]) throws -> [String: Any] {
        try c.command(op, args).obj("error")
    }

    func observer(_ g: InProcessGateway, user: String = "console-observer") throws -> SessionClient {
        let r = try g.rest().call("POST", "/v1/users/\(user)/tokens", ["observer": true, "ttlSeconds": 600])
        #expect(r.status == 201)
        let c = g.session()
        _ = try c.connect(token: try #require(r.json.str("token")))
        return c
    }

    // BX-3: an observer receives a room's whole stream, is no member, and is in no audience rule.
    @Test func observerWatchesARoomWithoutJoiningIt() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "live"]).status == 201)
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "quiet"]).status == 201)
        let alice = try g.client("alice"), carol = try g.client("carol")
        _ = try ok(alice, "room.join", ["roomId": "live"])
        _ = try ok(carol, "room.join", ["roomId": "quiet"])

        // Without an observer token, observing is refused (and changes nothing).
        let plain = try error(alice, "room.observe", ["roomId": "quiet"])
        #expect(plain.int("code") == 40301 && plain.str("field") == "token")
        let watcher = try observer(g)
        let missing = try error(watcher, "room.observe", ["roomId": "nowhere"])
        #expect(missing.int("code") == 23410)
        #expect(try error(watcher, "room.observe", ["roomId": String(repeating: "x", count: 65)]).str("field") == "args.roomId")
        let observed = try ok(watcher, "room.observe", ["roomId": "live"])
        #expect(observed.str("roomId") == "live" && observed.str("epoch")?.isEmpty == false)

        // A member's message and a server message both reach the observer, with stream positions.
        _ = try ok(alice, "room.send", ["roomId": "live", "content": "hello"])
        let seen = try watcher.waitFor("room.message")
        #expect(seen.str("roomId") == "live" && seen.obj("data").obj("message").str("content") == "hello")
        #expect(seen.int("offset") != nil && seen.str("epoch") == observed.str("epoch"))
        #expect(try rest.call("POST", "/v1/rooms/live/messages", ["content": "from server"]).status == 201)
        #expect(try watcher.waitFor("room.message").obj("data").obj("message").str("content") == "from server")
        // A join is seen as members see it, and the observer is still no member.
        let bob = try g.client("bob")
        _ = try ok(bob, "room.join", ["roomId": "live"])
        #expect(try watcher.waitFor("room.memberChanged").obj("data").int("memberCount") == 2)
        let members = try rest.call("GET", "/v1/rooms/live/members").json["members"] as? [[String: Any]] ?? []
        #expect(Set(members.compactMap { $0.str("userId") }) == ["alice", "bob"])
        #expect(try rest.call("GET", "/v1/rooms/live").json.obj("room").int("onlineUserCount") == 2)
        // Nothing of a room it does not watch reaches it.
        #expect(try rest.call("POST", "/v1/rooms/quiet/messages", ["content": "elsewhere"]).status == 201)
        #expect(try carol.waitFor("room.message").obj("data").obj("message").str("content") == "elsewhere")
        #expect(!watcher.drain(for: 0.3).contains { $0.str("roomId") == "quiet" })
        // Members' rules are unchanged by the observer: bob's message reaches alice and the
        // observer, not bob himself.
        _ = try ok(bob, "room.send", ["roomId": "live", "content": "bob here"])
        #expect(try watcher.waitFor("room.message").obj("data").obj("message").str("content") == "bob here")
        #expect(try alice.waitFor("room.message") { $0.obj("data").obj("message").str("content") == "bob here" }.str("roomId") == "live")
        #expect(!bob.drain(for: 0.3).contains { $0.obj("data").obj("message").str("content") == "bob here" })
        // The refused observe of a missing room left no watch behind: once created, it is silent.
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "nowhere"]).status == 201)
        #expect(try rest.call("POST", "/v1/rooms/nowhere/messages", ["content": "unwatched"]).status == 201)
        #expect(!watcher.drain(for: 0.3).contains { $0.str("roomId") == "nowhere" })
        // A destroyed room is no longer watched: its new incarnation is silent to the observer.
        _ = try ok(watcher, "room.observe", ["roomId": "quiet"])
        #expect(try rest.call("DELETE", "/v1/rooms/quiet").status == 200)
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "quiet"]).status == 201)
        #expect(try rest.call("POST", "/v1/rooms/quiet/messages", ["content": "new incarnation"]).status == 201)
        #expect(!watcher.drain(for: 0.3).contains { $0.obj("data").obj("message").str("content") == "new incarnation" })

        // Unobserve: nothing more arrives.
        _ = try ok(watcher, "room.unobserve", ["roomId": "live"])
        #expect(try rest.call("POST", "/v1/rooms/live/messages", ["content": "after"]).status == 201)
        _ = try alice.waitFor("room.message") { $0.obj("data").obj("message").str("content") == "after" }
        #expect(!watcher.drain(for: 0.3).contains { $0.str("ev") == "room.message" })
    }

    // BX-3: the number of rooms one connection may watch is bounded.
    @Test func observedRoomsAreBounded() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        #expect(try g.rest().call("PATCH", "/v1/settings", ["clientMessagesPerSecond": 1_000_000, "sendsPerUserPerSecond": 1_000_000]).status == 200)
        let watcher = try observer(g)
        for i in 0...Limits.maxObservedRooms {
            #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "r\(i)"]).status == 201)
        }
        for i in 0..<Limits.maxObservedRooms { _ = try ok(watcher, "room.observe", ["roomId": "r\(i)"]) }
        let over = try error(watcher, "room.observe", ["roomId": "r\(Limits.maxObservedRooms)"])
        #expect(over.int("code") == 41901 && over.str("field") == "args.roomId")
        _ = try ok(watcher, "room.unobserve", ["roomId": "r0"])
        _ = try ok(watcher, "room.observe", ["roomId": "r\(Limits.maxObservedRooms)"])
    }

    // BX-1, BX-4: a join's answer carries the stream offset to resume from; the events after it
    // reach the joiner with higher offsets, and a resume from it replays exactly the missed ones.
    @Test func joinAnswerCarriesTheStreamPosition() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "pos"]).status == 201)
        let first = try ok(try g.client("alice"), "room.join", ["roomId": "pos"]).obj("joinInfo")
        #expect(first.int("offset") == 0)
        for i in 0..<3 { #expect(try rest.call("POST", "/v1/rooms/pos/messages", ["content": "m\(i)"]).status == 201) }
        let bob = try g.client("bob")
        let joined = try ok(bob, "room.join", ["roomId": "pos"]).obj("joinInfo")
        // alice's join (1, 2: member change and NIM 301), three messages (3–5); bob's own join
        // events come after his position (they do not reach him).
        let offset = try #require(joined.int("offset"))
        #expect(offset == 5)
        #expect(joined.obj("room").str("epoch")?.isEmpty == false)
        #expect(try rest.call("POST", "/v1/rooms/pos/messages", ["content": "next"]).status == 201)
        let seen = try #require(try bob.waitFor("room.message").int("offset"))
        #expect(seen > offset)

        // Bob's connection drops, two messages go out; he resumes from the last offset he saw and
        // gets exactly those two, in order, then room.resume.
        bob.drop()
        g.settle()
        for i in 0..<2 { #expect(try rest.call("POST", "/v1/rooms/pos/messages", ["content": "missed\(i)"]).status == 201) }
        let again = try g.client("bob")
        _ = try ok(again, "room.join", ["roomId": "pos", "resume": ["epoch": joined.obj("room").str("epoch")!, "stream": bob.stream,
                                                                     "offset": seen]])
        let frames = again.drain(for: 0.3)
        let messages = frames.filter { $0.str("ev") == "room.message" }.compactMap { $0.obj("data").obj("message").str("content") }
        #expect(messages == ["missed0", "missed1"])
        #expect(frames.last { $0.str("ev") == "room.resume" }?.obj("data")["resumed"] as? Bool == true)
    }

    // BX-1: a client whose position is the stream's end resumes (nothing missed) also after the
    // room's window was swept for being quiet; one behind it is told outOfWindow.
    @Test func resumeInAQuietRoomAfterTheWindowWasSwept() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "calm", "keepAlive": true]).status == 201)
        let alice = try g.client("alice")
        let epoch = try #require(try ok(alice, "room.join", ["roomId": "calm"]).obj("joinInfo").obj("room").str("epoch"))
        #expect(try rest.call("POST", "/v1/rooms/calm/messages", ["content": "one"]).status == 201)
        let last = try #require(try alice.waitFor("room.message").int("offset"))
        g.settle()
        g.advance(seconds: 400)
        let rings = g.onLoop { () -> Int in
            let hub = g.core.hubs.hub(0)!
            hub.sweepRings()
            return hub.ringCount
        }
        #expect(rings == 0)
        // Alice's position is the stream's end: another device of hers resumes from it.
        let tablet = try g.client("alice", device: "tablet")
        _ = try ok(tablet, "room.join", ["roomId": "calm", "resume": ["epoch": epoch, "stream": alice.stream, "offset": last]])
        let resumed = try tablet.waitFor("room.resume").obj("data")
        #expect(resumed["resumed"] as? Bool == true && resumed.int("replayed") == 0)
        // One event behind, with the window gone: told so.
        let late = try g.client("carol")
        _ = try ok(late, "room.join", ["roomId": "calm", "resume": ["epoch": epoch, "stream": alice.stream, "offset": last - 1]])
        let refused = try late.waitFor("room.resume").obj("data")
        #expect(refused["resumed"] as? Bool == false && refused.str("reason") == "outOfWindow")
    }

    // PX-5: the directory pages in id order with a cursor that does not move when rooms are
    // created; filters; bad input names its field and changes nothing; apps are separate.
    @Test func directoryPagesAreStableAndFiltered() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        for (id, name) in [("a1", "Music night"), ("a3", "Quiet"), ("a5", "music club"), ("a7", "Talk"), ("b1", "Music")] {
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": id, "name": name]).status == 201)
        }
        #expect(try g.rest(app: InProcessGateway.otherApp.key, secret: InProcessGateway.otherApp.secret)
            .call("POST", "/v1/rooms", ["roomId": "a2"]).status == 201)
        let alice = try g.client("alice"), bob = try g.client("bob")
        _ = try ok(alice, "room.join", ["roomId": "a5"])
        _ = try ok(bob, "room.join", ["roomId": "a5"])
        _ = try ok(try g.client("carol"), "room.join", ["roomId": "a7"])

        func page(_ query: String) throws -> (ids: [String], next: String?, rooms: [[String: Any]]) {
            let r = try rest.call("GET", "/v1/directory/rooms" + query)
            #expect(r.status == 200, "\(query): \(r.text)")
            let rooms = r.json["rooms"] as? [[String: Any]] ?? []
            return (rooms.compactMap { $0.str("roomId") }, r.json["nextCursor"] as? String, rooms)
        }
        let p1 = try page("?prefix=a&limit=2")
        #expect(p1.ids == ["a1", "a3"])
        let cursor = try #require(p1.next)
        // Rooms created before and after the cursor: the next page starts right after a3.
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "a0"]).status == 201)
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "a4"]).status == 201)
        let p2 = try page("?prefix=a&limit=2&cursor=\(cursor)")
        #expect(p2.ids == ["a4", "a5"])
        let p3 = try page("?prefix=a&limit=2&cursor=\(try #require(p2.next))")
        #expect(p3.ids == ["a7"] && p3.next == nil)
        #expect(p2.rooms.last?.int("onlineCount") == 2 && p2.rooms.last?.str("name") == "music club")

        #expect(try page("?name=MUSIC").ids == ["a1", "a5", "b1"])
        #expect(try page("?minOnline=1").ids == ["a5", "a7"])
        #expect(try page("?minOnline=1&maxOnline=1").ids == ["a7"])
        #expect(try page("?maxOnline=0&prefix=a").ids == ["a0", "a1", "a3", "a4"])
        #expect(try page("").ids == ["a0", "a1", "a3", "a4", "a5", "a7", "b1"])  // not the other app's a2

        for (query, field) in [("?limit=0", "limit"), ("?limit=101", "limit"), ("?limit=x", "limit"), ("?cursor=%21%21", "cursor"),
                               ("?cursor=" + base64URL(Array("other:a1".utf8)), "cursor"), ("?minOnline=-1", "minOnline"),
                               ("?minOnline=3&maxOnline=2", "minOnline"), ("?prefix=" + String(repeating: "p", count: 65), "prefix")] {
            let r = try rest.call("GET", "/v1/directory/rooms" + query)
            #expect(r.status == 400 && r.json.int("code") == 1002 && r.json.str("field") == field, "\(query): \(r.text)")
        }
    }

    // PX-5: a user's connections and rooms, and disconnecting them (one device, or all) with a
    // close code and reason that reach the client; other users and apps are untouched.
    @Test func userConnectionsAreListedAndDisconnected() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        for id in ["r1", "r2"] { #expect(try rest.call("POST", "/v1/rooms", ["roomId": id]).status == 201) }
        #expect(try rest.call("PATCH", "/v1/settings", ["multipleRoomsPerUser": true]).status == 200)
        let phone = try g.client("alice", device: "phone"), laptop = try g.client("alice", device: "laptop"), bob = try g.client("bob")
        _ = try ok(phone, "room.join", ["roomId": "r1"])
        _ = try ok(laptop, "room.join", ["roomId": "r2"])
        _ = try ok(bob, "room.join", ["roomId": "r1"])
        let other = g.rest(app: InProcessGateway.otherApp.key, secret: InProcessGateway.otherApp.secret)
        let stranger = g.session()
        _ = try stranger.connect(token: try other.token("alice"))

        let listed = try rest.call("GET", "/v1/users/alice/connections")
        #expect(listed.status == 200)
        let connections = listed.json["connections"] as? [[String: Any]] ?? []
        #expect(connections.compactMap { $0.str("device") }.sorted() == ["laptop", "phone"])  // not the other app's alice
        #expect(connections.first { $0.str("device") == "phone" }?["rooms"] as? [String] == ["r1"])
        #expect(connections.allSatisfy { $0.str("node") == "ws://gateway.test/ws" && $0.int("since") != nil })
        #expect(try rest.call("GET", "/v1/users/alice/rooms").json["roomIds"] as? [String] == ["r1", "r2"])

        // One device: the phone is closed with 4010 and the app's reason; bob is told it left.
        let gone = try rest.call("DELETE", "/v1/users/alice/connections?device=phone&reason=policy%20violation")
        #expect(gone.status == 200 && gone.json.int("disconnected") == 1 && gone.json.int("closeCode") == 4010)
        // The close reaches the loops through the log, as every event does (in a cluster, each node closes its own).
        g.settle()
        #expect(phone.closeCode == 4010 && phone.closeReason == "policy violation")
        #expect(laptop.closeCode == nil && bob.closeCode == nil && stranger.closeCode == nil)
        _ = try bob.waitFor("room.memberChanged")
        g.settle()
        #expect(try rest.call("GET", "/v1/users/alice/rooms").json["roomIds"] as? [String] == ["r2"])
        // All devices, allowed to come back: 4011.
        let all = try rest.call("DELETE", "/v1/users/alice/connections?reconnect=true")
        g.settle()
        #expect(all.json.int("disconnected") == 1 && laptop.closeCode == 4011)
        #expect(stranger.closeCode == nil && bob.closeCode == nil)
        #expect(try rest.call("DELETE", "/v1/users/nobody/connections").json.int("disconnected") == 0)

        for (path, field) in [("/v1/users/alice/connections?reason=" + String(repeating: "r", count: 101), "reason"),
                              ("/v1/users/alice/connections?device=" + String(repeating: "d", count: 65), "device"),
                              ("/v1/users/alice/connections?reconnect=maybe", "reconnect"),
                              ("/v1/users/" + String(repeating: "u", count: 65) + "/connections", "userId")] {
            let r = try rest.call("DELETE", path)
            #expect(r.status == 400 && r.json.str("field") == field, "\(path): \(r.text)")
        }
    }

    // BX-3, BX-4: the client library and the console are served with validators, CORS for the
    // library, a Content-Security-Policy for the console, and redirects to it.
    @Test func clientLibraryAndConsoleAreServed() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let clients = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("clients")
        func get(_ path: String, _ headers: [(String, String)] = []) throws -> InProcessREST.Response {
            try g.rest().call("GET", path, headers: headers)
        }
        let lib = try get("/client/roomcast.js")
        #expect(lib.status == 200 && lib.header("Content-Type") == "text/javascript; charset=utf-8")
        #expect(lib.body == Array(try Data(contentsOf: clients.appendingPathComponent("js/roomcast.js"))))
        #expect(lib.header("Access-Control-Allow-Origin") == "*" && lib.header("Cache-Control") == "no-cache")
        let etag = try #require(lib.header("ETag"))
        let again = try get("/client/roomcast.js", [("If-None-Match", etag)])
        #expect(again.status == 304 && again.body.isEmpty && again.header("ETag") == etag)
        #expect(try get("/client/roomcast.js", [("If-None-Match", "\"other\"")]).status == 200)
        #expect(try get("/client/roomcast.d.ts").status == 200)

        let page = try get("/console/")
        #expect(page.status == 200 && page.header("Content-Type") == "text/html; charset=utf-8")
        #expect(page.body == Array(try Data(contentsOf: clients.appendingPathComponent("console/index.html"))))
        #expect(page.header("Content-Security-Policy")?.contains("default-src 'self'") == true)
        #expect(page.header("Access-Control-Allow-Origin") == nil)
        for path in ["/console/console.js", "/console/console.css"] { #expect(try get(path).status == 200, "\(path)") }
        #expect(try get("/").status == 302 && (try get("/")).header("Location") == "/console/")
        #expect(try get("/console").status == 301)
        #expect(try get("/console/console.js").header("Access-Control-Allow-Origin") == nil)
        #expect(lib.header("Content-Security-Policy") == nil)
        #expect(try get("/client/roomcast.js", [("If-None-Match", "W/" + etag)]).status == 304)
        let head = try g.rest().call("HEAD", "/client/roomcast.js")
        #expect(head.status == 200 && head.body.isEmpty && head.header("ETag") == etag)
    }

    // BX-3: the counters the console charts: events published and frames delivered.
    @Test func metricsCountEventsAndDeliveries() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        func counter(_ name: String) throws -> Int {
            let text = try g.rest().call("GET", "/metrics").text
            let line = try #require(text.split(separator: "\n").first { $0.hasPrefix(name + " ") })
            return Int(line.split(separator: " ")[1])!
        }
        #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "m"]).status == 201)
        let a = try g.client("alice"), b = try g.client("bob")
        _ = try ok(a, "room.join", ["roomId": "m"])
        _ = try ok(b, "room.join", ["roomId": "m"])
        g.settle()
        let events = try counter("roomcast_events_total"), deliveries = try counter("roomcast_deliveries_total")
        #expect(try g.rest().call("POST", "/v1/rooms/m/messages", ["content": "x"]).status == 201)
        _ = try a.waitFor("room.message")
        _ = try b.waitFor("room.message")
        g.settle()
        #expect(try counter("roomcast_events_total") == events + 1)
        #expect(try counter("roomcast_deliveries_total") == deliveries + 2)
    }
}
