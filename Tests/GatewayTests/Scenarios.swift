import Chat
import Foundation
import Testing
import TestKit

/// What a scenario needs of a client, whether it talks to the real binary over a socket
/// (`ProtocolClient`) or to the in-process gateway (`SessionClient`): one scenario body, two ways
/// to run it.
protocol ScenarioClient: AnyObject {
    func send(_ op: String, _ args: [String: Any]) throws -> [String: Any]
    func expectOK(_ reply: [String: Any]) throws -> [String: Any]
    func waitFor(_ name: String, timeout: Double, where match: ([String: Any]) -> Bool) throws -> [String: Any]
    func drain(for seconds: Double) -> [[String: Any]]
    func eventNames(within seconds: Double) -> [String]
    /// CS-3: the statuses the connect-time sync delivered, and its cursor.
    var syncedStatuses: [[String: Any]] { get }
    var conversationCursor: Int64 { get }
}

extension ScenarioClient {
    @discardableResult
    func waitFor(_ name: String, where match: ([String: Any]) -> Bool = { _ in true }) throws -> [String: Any] {
        try waitFor(name, timeout: 5, where: match)
    }
    func eventNames() -> [String] { eventNames(within: 0.3) }
}

/// What a scenario needs of a gateway: signed REST calls and connected clients.
protocol ScenarioGateway {
    associatedtype Client: ScenarioClient
    func restCall(_ method: String, _ path: String, _ body: Any?) throws -> RESTClient.Response
    /// A connected client of `user` on `device` (nil: the default device), synced from `cursor`.
    func connectClient(_ user: String, device: String?, cursor: Int64?) throws -> Client
    /// Lets time pass for the gateway's timers (a manual clock moves; a real one is waited for).
    func letTimePass(seconds: Int64)
}

extension ScenarioGateway {
    func restCall(_ method: String, _ path: String) throws -> RESTClient.Response { try restCall(method, path, nil) }
    func connectClient(_ user: String, device: String? = nil, cursor: Int64? = nil) throws -> Client {
        try connectClient(user, device: device, cursor: cursor)
    }
    /// Signed REST calls, written as the tests write them (`rest.call(...)`).
    var api: ScenarioREST<Self> { ScenarioREST(gateway: self) }
}

struct ScenarioREST<G: ScenarioGateway> {
    let gateway: G
    func call(_ method: String, _ path: String, _ body: Any? = nil) throws -> RESTClient.Response { try gateway.restCall(method, path, body) }
}

extension ProtocolClient: ScenarioClient {
    func send(_ op: String, _ args: [String: Any]) throws -> [String: Any] { try command(op, args) }
}

extension SessionClient: ScenarioClient {
    func send(_ op: String, _ args: [String: Any]) throws -> [String: Any] { try command(op, args) }
}

extension GatewayProcess: ScenarioGateway {
    func restCall(_ method: String, _ path: String, _ body: Any?) throws -> RESTClient.Response { try rest().call(method, path, body) }
    func connectClient(_ user: String, device: String?, cursor: Int64?) throws -> ProtocolClient { try client(user, device: device, cursor: cursor) }
    func letTimePass(seconds: Int64) { Thread.sleep(forTimeInterval: Double(seconds)) }
}

extension InProcessGateway: ScenarioGateway {
    func restCall(_ method: String, _ path: String, _ body: Any?) throws -> RESTClient.Response { try rest().call(method, path, body) }
    func connectClient(_ user: String, device: String?, cursor: Int64?) throws -> SessionClient { try client(user, device: device, cursor: cursor) }
    func letTimePass(seconds: Int64) { advance(seconds: seconds) }
}

/// Scenarios run in-process (ScenarioTests, GroupsAndConversationsTests), against the binary
/// (SmokeTests) and against a cluster of three nodes (ClusterScenarioTests).
enum Scenarios {
    static func join<C: ScenarioClient>(_ c: C, _ room: String, _ extra: [String: Any] = [:]) throws -> [String: Any] {
        var args: [String: Any] = ["roomId": room]
        for (k, v) in extra { args[k] = v }
        return try c.expectOK(try c.send("room.join", args))
    }

    /// QS-1, QS-2, QS-5 wherever the clients are (on a cluster, on other nodes than the REST
    /// calls): the class and type travel with a message; a room over its budget refuses with
    /// 42902 and Retry-After, and a refused message reaches nobody; a transient message reaches
    /// the members with no offset and is not kept.
    static func roomQoS<G: ScenarioGateway>(_ g: G) throws {
        #expect(try g.restCall("POST", "/v1/rooms", ["roomId": "qos"]).status == 201)
        let a = try g.connectClient("qa"), b = try g.connectClient("qb")
        for c in [a, b] { _ = try join(c, "qos") }
        _ = a.drain(for: 0.3)
        _ = b.drain(for: 0.3)
        #expect(try g.restCall("POST", "/v1/rooms/qos/messages", ["content": "first", "priority": "high", "messageType": "RC:TxtMsg"]).status == 201)
        for c in [a, b] {
            let m = try c.waitFor("room.message", timeout: 10) { $0.obj("data").obj("message").str("content") == "first" }.obj("data").obj("message")
            #expect(m.str("priority") == "high" && m.str("messageType") == "RC:TxtMsg")
        }
        // QS-5: no offset, not kept.
        #expect(try g.restCall("POST", "/v1/rooms/qos/messages", ["content": "flash", "transient": true]).status == 201)
        for c in [a, b] {
            let e = try c.waitFor("room.message", timeout: 10) { $0.obj("data").obj("message").str("content") == "flash" }
            #expect(e["offset"] == nil && e.obj("data").obj("message")["transient"] as? Bool == true)
        }
        // QS-2: one message a second: of five sent at once, some are refused, and those reach nobody.
        #expect(try g.restCall("PATCH", "/v1/settings", ["roomMessagesPerSecond": 1]).status == 200)
        var accepted: [String] = [], refused = 0
        for i in 0..<5 {
            let r = try g.restCall("POST", "/v1/rooms/qos/messages", ["content": "burst-\(i)"])
            if r.status == 201 {
                accepted.append("burst-\(i)")
            } else {
                #expect(r.status == 429 && r.json.int("code") == 42902 && r.json.str("field") == "roomId" && r.header("Retry-After") != nil, "\(r.text)")
                refused += 1
            }
        }
        #expect(refused >= 1)
        #expect(try g.restCall("PATCH", "/v1/settings", ["roomMessagesPerSecond": Limits.defaultRoomMessagesPerSecond]).status == 200)
        #expect(try g.restCall("POST", "/v1/rooms/qos/messages", ["content": "end"]).status == 201)
        for c in [a, b] {
            var seen: [String] = []
            let deadline = Date().addingTimeInterval(10)
            while !seen.contains("end") && Date() < deadline {
                seen += c.drain(for: 0.3).filter { $0.str("ev") == "room.message" }.compactMap { $0.obj("data").obj("message").str("content") }
            }
            #expect(seen == accepted + ["end"], "only the accepted messages, in order: \(seen)")
        }
        let history = try g.restCall("GET", "/v1/rooms/qos/messages?limit=20").json["messages"] as? [[String: Any]] ?? []
        #expect(Set(history.map { $0.str("content") ?? "" }) == Set(["first", "end"] + accepted))
    }

    /// The messages `c` receives until `marker` (sent last, to everyone), in order: what a
    /// client got and, as important, what it did not.
    /// MO-1, MO-2 wherever the clients are (on a cluster, on other nodes than the REST calls): a
    /// recall reaches whoever the message reached and nobody else, and history shows the
    /// tombstone; a manager recalls from its client; a blocked word refuses a client's message
    /// (21501, nobody receives it) and a replaced one arrives replaced.
    static func moderation<G: ScenarioGateway>(_ g: G) throws {
        #expect(try g.restCall("POST", "/v1/rooms", ["roomId": "mod"]).status == 201)
        let ann = try g.connectClient("mo-ann"), ben = try g.connectClient("mo-ben"), cat = try g.connectClient("mo-cat")
        for c in [ann, ben, cat] { _ = try join(c, "mod") }
        #expect(try g.restCall("PUT", "/v1/rooms/mod/members/mo-cat/role", ["role": "manager"]).status == 200)
        for c in [ann, ben, cat] { _ = c.drain(for: 0.3) }

        // MO-1: the app server recalls a message to the room; a message to ben alone is recalled
        // to ben and its sender, not to cat.
        let sent = try ann.expectOK(try ann.send("room.send", ["roomId": "mod", "content": "oops"]))
        let id = try #require(sent.obj("message").str("messageId"))
        #expect(try g.restCall("DELETE", "/v1/rooms/mod/messages/\(id)").status == 200)
        for c in [ann, ben, cat] {
            #expect(try c.waitFor("message.recalled", timeout: 10) { $0.obj("data").str("messageId") == id }.obj("data").str("sender") == "mo-ann")
        }
        let private_ = try g.restCall("POST", "/v1/rooms/mod/messages", ["content": "for ben", "targets": ["mo-ben"], "fromUserId": "mo-ann"])
        let privateId = try #require(private_.json.obj("message").str("messageId"))
        _ = try ben.waitFor("room.message", timeout: 10) { $0.obj("data").obj("message").str("messageId") == privateId }
        // cat (a manager, who did not get the message) recalls it from its client.
        _ = try cat.expectOK(try cat.send("room.recall", ["roomId": "mod", "messageId": privateId]))
        #expect(try ben.waitFor("message.recalled", timeout: 10) { $0.obj("data").str("messageId") == privateId }.obj("data").str("operator") == "mo-cat")
        #expect(try ann.waitFor("message.recalled", timeout: 10) { $0.obj("data").str("messageId") == privateId }.obj("data").str("sender") == "mo-ann")
        #expect(try g.restCall("POST", "/v1/rooms/mod/messages", ["content": "end-1"]).status == 201)
        let catSaw = cat.drain(for: 0.5)
        #expect(!catSaw.contains { $0.str("ev") == "message.recalled" && $0.obj("data").str("messageId") == privateId },
                "a member the message did not reach must not learn of its recall")
        let history = try g.restCall("GET", "/v1/rooms/mod/messages?order=asc").json["messages"] as? [[String: Any]] ?? []
        #expect(history.filter { $0["recalled"] as? Bool == true }.compactMap { $0.str("messageId") } == [id, privateId])
        #expect(!history.contains { ($0.str("content") ?? "") == "oops" || ($0.str("content") ?? "") == "for ben" })
        // A bystander may not recall another's message.
        let late = try ann.expectOK(try ann.send("room.send", ["roomId": "mod", "content": "mine"]))
        let refused = try ben.send("room.recall", ["roomId": "mod", "messageId": try #require(late.obj("message").str("messageId"))])
        #expect(refused.obj("error").int("code") == 40301, "\(refused)")

        // MO-2.
        #expect(try g.restCall("POST", "/v1/sensitive-words", ["words": [["word": "spam", "replacement": "****"], ["word": "forbidden"]]]).status == 200)
        for c in [ann, ben, cat] { _ = c.drain(for: 0.3) }
        let blocked = try ann.send("room.send", ["roomId": "mod", "content": "forbidden words"])
        #expect(blocked.obj("error").int("code") == 21501, "\(blocked)")
        _ = try ann.expectOK(try ann.send("room.send", ["roomId": "mod", "content": "no spam"]))
        #expect(try g.restCall("POST", "/v1/rooms/mod/messages", ["content": "end-2"]).status == 201)
        #expect(messagesUntil(ben, "end-2") == ["no ****", "end-2"])
        #expect(messagesUntil(cat, "end-2") == ["no ****", "end-2"])
    }

    static func messagesUntil<C: ScenarioClient>(_ c: C, _ marker: String) -> [String] {
        var seen: [String] = []
        let deadline = Date().addingTimeInterval(10)
        while !seen.contains(marker) && Date() < deadline {
            seen += c.drain(for: 0.2).filter { $0.str("ev") == "room.message" }.compactMap { $0.obj("data").obj("message").str("content") }
        }
        return seen
    }

    /// AU-4 wherever the clients are: past the app's threshold nobody is told of a member one by
    /// one; every member gets `room.members` summaries whose counts add up to every join and
    /// departure and whose ids name them; a counts-only join gets counts without ids; a member of
    /// another room gets nothing.
    static func memberSummaries<G: ScenarioGateway>(_ g: G) throws {
        let set = try g.restCall("PATCH", "/v1/settings", ["memberEventsThreshold": 2, "memberSummaryIntervalMs": 200])
        #expect(set.status == 200, "\(set.text)")
        for room in ["ms", "ms-other"] { #expect(try g.restCall("POST", "/v1/rooms", ["roomId": room]).status == 201) }
        let elsewhere = try g.connectClient("ms-elsewhere")
        _ = try join(elsewhere, "ms-other")
        let counter = try g.connectClient("ms-counter")
        _ = try join(counter, "ms", ["memberEvents": "counts"])
        let first = try g.connectClient("ms-a")
        _ = try join(first, "ms")
        var late: [G.Client] = []
        for u in ["ms-b", "ms-c", "ms-d"] {
            let c = try g.connectClient(u)
            _ = try join(c, "ms")
            late.append(c)
        }
        // Summaries until their counts account for `joined` joins and `left` departures.
        func summaries(_ c: G.Client, joined: Int, left: Int) -> (frames: [[String: Any]], others: [String]) {
            var frames: [[String: Any]] = [], others: [String] = []
            for _ in 0..<20 {
                g.letTimePass(seconds: 1)
                for f in c.drain(for: 0.2) {
                    if f.str("ev") == "room.members" { frames.append(f) } else if let ev = f.str("ev") { others.append(ev) }
                }
                let j = frames.reduce(0) { $0 + ($1.obj("data").int("joined") ?? 0) }
                let l = frames.reduce(0) { $0 + ($1.obj("data").int("left") ?? 0) }
                if j >= joined && l >= left { break }
            }
            return (frames, others)
        }
        let (seen, other) = summaries(first, joined: 3, left: 0)
        #expect(!other.contains("room.memberChanged") && !other.contains("room.notification"), "\(other)")
        #expect(seen.flatMap { $0.obj("data")["joinedIds"] as? [String] ?? [] } == ["ms-b", "ms-c", "ms-d"], "\(seen)")
        #expect(seen.last?.obj("data").int("memberCount") == 5)
        #expect(seen.allSatisfy { $0.int("offset") != nil })
        let (counts, counterOther) = summaries(counter, joined: 5, left: 0)
        #expect(counts.reduce(0) { $0 + ($1.obj("data").int("joined") ?? 0) } == 5, "\(counts)")
        #expect(counts.allSatisfy { $0.obj("data")["joinedIds"] == nil && $0.obj("data")["leftIds"] == nil })
        #expect(!counterOther.contains("room.memberChanged") && !counterOther.contains("room.notification"), "\(counterOther)")

        _ = try late[2].expectOK(try late[2].send("room.leave", ["roomId": "ms"]))
        let (gone, _) = summaries(first, joined: 0, left: 1)
        #expect(gone.flatMap { $0.obj("data")["leftIds"] as? [String] ?? [] } == ["ms-d"], "\(gone)")
        #expect(gone.last?.obj("data").int("memberCount") == 4)
        #expect(!elsewhere.drain(for: 0.3).contains { $0.str("ev") == "room.members" })
        #expect(try g.restCall("PATCH", "/v1/settings", ["memberEventsThreshold": 0]).status == 200)
    }

    /// AU-1, AU-2 wherever the clients are (on a cluster, on other nodes than the REST calls):
    /// a message to a tag expression or to listed members reaches exactly them, history reads
    /// by the same rule, a tag change moves a member between audiences, counts follow, and bad
    /// tags, expressions and lists are refused with the field named and change nothing.
    static func audiences<G: ScenarioGateway>(_ g: G) throws {
        #expect(try g.restCall("POST", "/v1/rooms", ["roomId": "aud"]).status == 201)
        let vip = try g.connectClient("au-vip"), cn = try g.connectClient("au-cn"), plain = try g.connectClient("au-plain")
        _ = try join(vip, "aud", ["tags": ["vip", "cn"]])
        _ = try join(cn, "aud", ["tags": ["cn"]])
        _ = try join(plain, "aud")
        for c in [vip, cn, plain] { _ = c.drain(for: 0.3) }
        func send(_ body: [String: Any]) throws -> RESTClient.Response { try g.restCall("POST", "/v1/rooms/aud/messages", body) }

        #expect(try send(["content": "to-vip", "targetTags": ["tag": "vip"]]).status == 201)
        #expect(try send(["content": "cn-not-vip", "targetTags": ["op": "and", "tags": [["tag": "cn"], ["op": "not", "tags": [["tag": "vip"]]]]]]).status == 201)
        #expect(try send(["content": "to-plain", "targets": ["au-plain"]]).status == 201)
        #expect(try send(["content": "end-1"]).status == 201)
        #expect(messagesUntil(vip, "end-1") == ["to-vip", "end-1"])
        #expect(messagesUntil(cn, "end-1") == ["cn-not-vip", "end-1"])
        #expect(messagesUntil(plain, "end-1") == ["to-plain", "end-1"])

        // History reads by the same rule: a member its own, the app server everything, by tag.
        func history<C: ScenarioClient>(_ c: C) throws -> [String] {
            let r = try c.expectOK(try c.send("room.history", ["roomId": "aud", "order": "asc", "limit": 50]))
            return (r["messages"] as? [[String: Any]] ?? []).compactMap { $0.str("content") }
        }
        #expect(try history(vip) == ["to-vip", "end-1"])
        #expect(try history(plain) == ["to-plain", "end-1"])
        let all = try g.restCall("GET", "/v1/rooms/aud/messages?order=asc&limit=50").json["messages"] as? [[String: Any]] ?? []
        #expect(all.compactMap { $0.str("content") } == ["to-vip", "cn-not-vip", "to-plain", "end-1"])
        let byTag = try g.restCall("GET", "/v1/rooms/aud/messages?order=asc&tags=vip").json["messages"] as? [[String: Any]] ?? []
        #expect(byTag.compactMap { $0.str("content") } == ["to-vip", "cn-not-vip"])

        // The app server retags plain: it is told, and messages to vip now reach it.
        #expect(try g.restCall("PUT", "/v1/rooms/aud/members/au-plain/tags", ["tags": ["vip"]]).status == 200)
        let told = try plain.waitFor("room.tagsUpdated", timeout: 10) { _ in true }
        #expect(told.obj("data")["tags"] as? [String] == ["vip"])
        #expect(try g.restCall("GET", "/v1/rooms/aud/tags/vip/count").json.int("count") == 2)
        let listed = try g.restCall("GET", "/v1/rooms/aud/tags/vip/members").json["members"] as? [[String: Any]] ?? []
        #expect(Set(listed.compactMap { $0.str("userId") }) == ["au-vip", "au-plain"])
        #expect(try send(["content": "vip-again", "targetTags": ["tag": "vip"]]).status == 201)
        #expect(try send(["content": "end-2"]).status == 201)
        #expect(messagesUntil(vip, "end-2") == ["vip-again", "end-2"])
        #expect(messagesUntil(plain, "end-2") == ["vip-again", "end-2"])
        #expect(messagesUntil(cn, "end-2") == ["end-2"])

        // Bad input names its field and changes nothing.
        var deep: [String: Any] = ["tag": "a"]
        for _ in 0..<Limits.maxTagExpressionDepth { deep = ["op": "not", "tags": [deep]] }
        let tooMany = (0...Limits.maxTagsPerMember).map { "t\($0)" }
        for (body, field) in [(["content": "x", "targetTags": deep], "targetTags"),
                              (["content": "x", "targetTags": ["op": "xor", "tags": [["tag": "a"]]]], "targetTags"),
                              (["content": "x", "targets": (0...Limits.maxMessageTargets).map { "u\($0)" }], "targets")] as [([String: Any], String)] {
            let r = try send(body)
            #expect(r.status == 400 && r.json.str("field") == field, "\(r.text)")
        }
        let r = try g.restCall("PUT", "/v1/rooms/aud/members/au-cn/tags", ["tags": tooMany])
        #expect(r.status == 400 && r.json.str("field") == "tags", "\(r.text)")
        let late = try g.connectClient("au-late")
        let refused = try late.send("room.join", ["roomId": "aud", "tags": tooMany])
        #expect(refused.obj("error").str("field") == "tags", "\(refused)")
        #expect(try g.restCall("GET", "/v1/rooms/aud/tags/cn/count").json.int("count") == 2)
        #expect(try send(["content": "end-3"]).status == 201)
        #expect(messagesUntil(cn, "end-3") == ["end-3"])

        // AU-3: one call to two rooms; a missing room refuses the whole call (nothing reaches
        // either room). (A broadcast reaches every room of the app, other scenarios' included:
        // MultiRoomSurfaceTests covers it on its own gateway.)
        #expect(try g.restCall("POST", "/v1/rooms", ["roomId": "aud-b"]).status == 201)
        let other = try g.connectClient("au-other")
        _ = try join(other, "aud-b")
        _ = other.drain(for: 0.3)
        let missing = try g.restCall("POST", "/v1/messages", ["roomIds": ["aud", "aud-missing"], "content": "never"])
        #expect(missing.status == 404 && missing.json.str("field") == "roomIds", "\(missing.text)")
        let both = try g.restCall("POST", "/v1/messages", ["roomIds": ["aud", "aud-b"], "content": "both"])
        #expect(both.status == 201 && (both.json["messages"] as? [[String: Any]])?.count == 2, "\(both.text)")
        #expect(messagesUntil(other, "both") == ["both"])
        #expect(messagesUntil(cn, "both") == ["both"])
        #expect(messagesUntil(vip, "both") == ["end-3", "both"])
    }

    /// RC-1, RC-2, RC-5, RC-6, RC-7: moderation reaches exactly its audience, and who must hear
    /// nothing hears nothing.
    static func rongCloudModeration<G: ScenarioGateway>(_ g: G) throws {
        #expect(try g.restCall("POST", "/v1/rooms", ["roomId": "rc"]).status == 201)
        #expect(try g.restCall("POST", "/v1/rooms", ["roomId": "elsewhere"]).status == 201)
        let alice = try g.connectClient("alice"), bob = try g.connectClient("bob"), dave = try g.connectClient("dave"), carol = try g.connectClient("carol")
        let joined = try Scenarios.join(alice, "rc")
        #expect(joined.obj("joinInfo").int("memberCount") == 1)
        try alice.waitFor("room.status") { $0.obj("data").str("status") == "joined" }
        _ = try Scenarios.join(bob, "rc")
        _ = try Scenarios.join(dave, "rc")
        _ = try Scenarios.join(carol, "elsewhere")
        // RC-2: alice saw bob and dave arrive.
        try alice.waitFor("room.memberChanged") { ($0.obj("data")["members"] as? [[String: Any]])?.first?.str("userId") == "dave" }
        _ = [alice, bob, dave, carol].map { $0.drain(for: 0.2) }

        // RC-6: mute dave with needNotify → every member; carol (another room) nothing.
        #expect(try g.restCall("POST", "/v1/rooms/rc/mutes", ["userIds": ["dave"], "minutes": 5, "needNotify": true, "extra": "{\"k\":1}"]).status == 200)
        for c in [alice, bob, dave] {
            let e = try c.waitFor("room.ban")
            #expect(e.obj("data").int("banType") == 1)
            #expect(e.obj("data").int("durationTime") == 300_000)
            #expect(e.obj("data")["userIdList"] as? [String] == ["dave"])
            #expect(e.obj("data").str("extra") == "{\"k\":1}")
            #expect(e.int("offset") != nil && e.str("epoch") != nil)
        }
        #expect(carol.eventNames().isEmpty)

        // RC-7: dave's send is refused; alice's goes to the others.
        let refused = try dave.send("room.send", ["roomId": "rc", "content": "hi"])
        #expect(refused.obj("error").int("code") == 23408)
        _ = try alice.expectOK(try alice.send("room.send", ["roomId": "rc", "content": "hello"]))
        #expect(try bob.waitFor("room.message").obj("data").obj("message").str("content") == "hello")
        #expect(try dave.waitFor("room.message").obj("data").obj("message").str("sender") == "alice")
        #expect(!alice.eventNames().contains("room.message"))

        // RC-5: block bob with needNotify → everyone incl. bob; bob is removed and barred.
        #expect(try g.restCall("POST", "/v1/rooms/rc/blocks", ["userIds": ["bob"], "minutes": 10, "needNotify": true]).status == 200)
        for c in [alice, bob, dave] { #expect(try c.waitFor("room.block").obj("data").int("operateType") == 1) }
        #expect(try bob.waitFor("room.kicked").obj("data").int("reason") == 5)
        try alice.waitFor("room.memberChanged") { ($0.obj("data")["members"] as? [[String: Any]])?.first?.str("action") == "quit" }
        let rejoin = try bob.send("room.join", ["roomId": "rc"])
        #expect(rejoin.obj("error").int("code") == 23409)
        try bob.waitFor("room.status") { $0.obj("data").str("status") == "joinFailed" && $0.obj("data")["autoRejoin"] as? Bool == false }
        #expect(carol.eventNames().isEmpty)
        _ = [alice, dave].map { $0.drain(for: 0.2) }

        // RC-5: unblock tells only bob.
        #expect(try g.restCall("DELETE", "/v1/rooms/rc/blocks?userIds=bob&needNotify=true").status == 200)
        #expect(try bob.waitFor("room.block").obj("data").int("operateType") == 0)
        #expect(!alice.eventNames().contains("room.block"))
        #expect(!dave.eventNames().contains("room.block"))

        // RC-6 7: a global mute tells only the muted user, wherever they are.
        #expect(try g.restCall("POST", "/v1/global-mutes", ["userIds": ["carol"], "minutes": 1, "needNotify": true]).status == 200)
        #expect(try carol.waitFor("room.ban").obj("data").int("banType") == 7)
        #expect(!alice.eventNames().contains("room.ban"))

        // RC-1: destroy tells the online members.
        #expect(try g.restCall("DELETE", "/v1/rooms/rc").status == 200)
        #expect(try alice.waitFor("room.status").obj("data").str("status") == "destroyed")
        #expect(try dave.waitFor("room.status").obj("data").str("destroyType") == "manual")
        #expect(carol.eventNames().isEmpty)
    }

    static func infos(_ e: [String: Any]) -> [[String: Any]] { e.obj("data")["infoList"] as? [[String: Any]] ?? [] }

    /// NIM-2, NIM-6, NIM-9, NIM-12, NIM-15, NIM-16: roles, the queue and kicks.
    static func nimRolesQueueAndKicks<G: ScenarioGateway>(_ g: G) throws {
        let rest = g.api
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "nim", "creator": "owner"]).status == 201)
        let owner = try g.connectClient("owner"), guest = try g.connectClient("guest"), viewer = try g.connectClient("viewer"), outsider = try g.connectClient("outsider")
        _ = try Scenarios.join(owner, "nim")
        _ = try Scenarios.join(guest, "nim", ["ext": "{\"vip\":true}", "notifyExt": "hello"])
        // NIM-2/NIM-9: the enter notification carries notifyExt and the member's ext.
        let enter = try owner.waitFor("room.notification") { $0.obj("data").int("eventType") == 301 }
        #expect(enter.obj("data").str("notifyExt") == "hello")
        #expect(enter.obj("data").obj("source").str("ext") == "{\"vip\":true}")
        _ = try Scenarios.join(viewer, "nim")
        _ = [owner, guest, viewer].map { $0.drain(for: 0.2) }

        // NIM-12: a role change over REST notifies the room (307) and changes the type.
        let role = try rest.call("PUT", "/v1/rooms/nim/members/guest/role", ["role": "manager", "notifyExt": "promoted"])
        #expect(role.status == 200)
        #expect((role.json["members"] as? [[String: Any]])?.first?.str("type") == "manager")
        for c in [owner, guest, viewer] {
            let n = try c.waitFor("room.notification")
            #expect(n.obj("data").int("eventType") == 307)
            #expect(n.obj("data").str("notifyExt") == "promoted")
        }
        #expect(try rest.call("PUT", "/v1/rooms/nim/members/guest/role", ["role": "admin"]).json.str("field") == "role")

        // NIM-16: a transient element goes when its owner leaves: one 320 for the others.
        _ = try viewer.expectOK(try viewer.send("queue.offer", ["roomId": "nim", "key": "mic", "value": "viewer", "transient": true]))
        #expect(try owner.waitFor("room.notification").obj("data").obj("ext").str("changeType") == "offer")
        _ = owner.drain(for: 0.2)
        _ = guest.drain(for: 0.2)
        _ = try viewer.expectOK(try viewer.send("room.leave", ["roomId": "nim"]))
        let clear = try owner.waitFor("room.notification") { $0.obj("data").int("eventType") == 320 }
        #expect(clear.obj("data").obj("ext").str("changeType") == "partialClear")
        #expect(clear.obj("data").obj("ext").obj("elements").str("mic") == "viewer")
        #expect(try rest.call("GET", "/v1/rooms/nim/queue").json["elements"] as? [Any] != nil)

        // NIM-15: the new manager kicks from the client; NIM-6 reason 2 with the ext.
        _ = try Scenarios.join(viewer, "nim")
        _ = [owner, guest, viewer].map { $0.drain(for: 0.2) }
        _ = try guest.expectOK(try guest.send("manage.kick", ["roomId": "nim", "userId": "viewer", "notifyExt": "bye"]))
        let kicked = try viewer.waitFor("room.kicked")
        #expect(kicked.obj("data").int("reason") == 2)
        #expect(kicked.obj("data").str("ext") == "bye")
        #expect(try owner.waitFor("room.notification").obj("data").int("eventType") == 313)
        // A manager may not act on the creator.
        #expect(try guest.send("manage.kick", ["roomId": "nim", "userId": "owner"]).obj("error").int("code") == 40301)
        #expect(outsider.eventNames().isEmpty)
    }

    /// ZIM-1, ZIM-2, ZIM-4, ZIM-5, ZIM-6: create, join, switch and leave all.
    static func zimCreateJoinSwitchAndLeaveAll<G: ScenarioGateway>(_ g: G) throws {
        // ZIM users may be in several rooms; RC-4's default is one room per user.
        #expect(try g.restCall("PATCH", "/v1/settings", ["multipleRoomsPerUser": true]).status == 200)
        let alice = try g.connectClient("alice"), bob = try g.connectClient("bob"), carol = try g.connectClient("carol"), eve = try g.connectClient("eve")
        _ = try Scenarios.join(alice, "z1", ["mode": "create", "room": ["name": "One", "destroy": ["policy": "whenEmpty", "seconds": 60]]])
        // ZIM-1: creating again fails; ZIM-2: joining a missing room fails.
        #expect(try bob.send("room.join", ["roomId": "z1", "mode": "create"]).obj("error").int("code") == 40901)
        #expect(try bob.send("room.join", ["roomId": "missing"]).obj("error").int("code") == 23410)
        _ = try Scenarios.join(bob, "z1")
        _ = try Scenarios.join(carol, "z2", ["mode": "enter"])
        _ = try Scenarios.join(eve, "other", ["mode": "enter"])
        _ = [alice, bob, carol, eve].map { $0.drain(for: 0.2) }

        // ZIM-5: alice switches z1 → z2.
        let switched = try alice.send("room.switch", ["from": "z1", "to": ["roomId": "z2"], "createIfMissing": false])
        _ = try alice.expectOK(switched)
        let states = alice.drain(for: 0.3).filter { $0.str("ev") == "room.status" }
            .map { "\($0.str("roomId") ?? ""):\($0.obj("data").str("zimState") ?? ""):\($0.obj("data").str("zimEvent") ?? "")" }
        #expect(states == ["z2:connecting:activeSwitch", "z2:connected:success", "z1:disconnected:success"])
        #expect(try bob.waitFor("room.memberChanged").obj("data")["members"].map { ($0 as? [[String: Any]])?.first?.str("action") } == "quit")
        #expect(try carol.waitFor("room.memberChanged").obj("data")["members"].map { ($0 as? [[String: Any]])?.first?.str("action") } == "join")
        #expect(eve.eventNames().isEmpty)

        // A switch to a missing room without creation fails with the seed's states.
        let failed = try alice.send("room.switch", ["from": "z2", "to": ["roomId": "nowhere"]])
        #expect(failed.obj("error").int("code") == 23410)
        let failStates = alice.drain(for: 0.3).map { $0.obj("data").str("zimEvent") ?? "" }
        #expect(failStates == ["activeSwitch", "switchFailed"])

        // ZIM-6: leave all rooms of this connection only.
        _ = try Scenarios.join(alice, "z3", ["mode": "enter"])
        let left = try alice.expectOK(try alice.send("room.leaveAll", [:]))
        #expect(Set(left["roomIds"] as? [String] ?? []) == ["z2", "z3"])
    }

    /// UG-1..UG-6: ultra-group channel changes reach exactly the seed's audiences.
    static func ultraGroupChannels<G: ScenarioGateway>(_ g: G) throws {
        let rest = g.api
        #expect(try rest.call("POST", "/v1/groups", ["groupId": "g1", "name": "Guild", "creator": "alice"]).status == 201)
        #expect(try rest.call("POST", "/v1/groups/g1/members", ["userIds": ["bob", "carol"]]).status == 200)
        #expect(try rest.call("POST", "/v1/groups/g1/channels", ["channelId": "c1", "type": "public"]).status == 201)
        #expect(try rest.call("POST", "/v1/groups/g1/channels", ["channelId": "p1", "type": 1]).status == 201)
        #expect(try rest.call("POST", "/v1/groups/g1/channels/c1/private-members", ["userIds": ["alice"]]).status == 200)
        #expect(try rest.call("POST", "/v1/groups/g1/channels/p1/private-members", ["userIds": ["bob", "carol"]]).status == 200)
        let phone = try g.connectClient("alice", device: "phone"), tablet = try g.connectClient("alice", device: "tablet")
        let bob = try g.connectClient("bob"), carol = try g.connectClient("carol"), dave = try g.connectClient("dave")

        // UG-2: public → private: alice (on the list, both devices) 2; bob and carol 6; dave nothing.
        #expect(try rest.call("PATCH", "/v1/groups/g1/channels/c1", ["type": "private"]).json.obj("channel").str("type") == "private")
        for c in [phone, tablet] {
            let e = try c.waitFor("group.channelTypeChanged")
            #expect(Scenarios.infos(e).map { $0.int("changeType") } == [2] && Scenarios.infos(e).first?.str("channelId") == "c1")
        }
        for c in [bob, carol] { #expect(Scenarios.infos(try c.waitFor("group.channelTypeChanged")).first?.int("changeType") == 6) }
        #expect(dave.eventNames(within: 0.3).isEmpty)
        // One array event per recipient per call (UG-5).
        for c in [phone, tablet, bob, carol] { #expect(!c.eventNames(within: 0).contains("group.channelTypeChanged")) }

        // UG-2: private → public: only the private list (alice), type 3.
        #expect(try rest.call("PATCH", "/v1/groups/g1/channels/c1", ["type": 0]).status == 200)
        for c in [phone, tablet] { #expect(Scenarios.infos(try c.waitFor("group.channelTypeChanged")).first?.int("changeType") == 3) }
        for c in [bob, carol, dave] { #expect(c.eventNames(within: 0.3).isEmpty) }

        // UG-1: the default channel never turns private; a stranger fails the whole add (24406).
        let defaultPrivate = try rest.call("PATCH", "/v1/groups/g1/channels/RCDefault", ["type": "private"])
        #expect(defaultPrivate.status == 400 && defaultPrivate.json.str("field") == "type")
        let stranger = try rest.call("POST", "/v1/groups/g1/channels/p1/private-members", ["userIds": ["alice", "dave"]])
        #expect(stranger.status == 403 && stranger.json.int("code") == 24406 && stranger.json.str("field") == "userIds")
        let tooMany = try rest.call("POST", "/v1/groups/g1/channels/p1/private-members", ["userIds": (0..<21).map { "u\($0)" }])
        #expect(tooMany.status == 400 && tooMany.json.str("field") == "userIds")
        #expect(try rest.call("GET", "/v1/groups/g1/channels/p1/private-members").json["userIds"] as? [String] == ["bob", "carol"])

        // UG-4: taking bob off a private list tells bob only, about himself.
        #expect(try rest.call("DELETE", "/v1/groups/g1/channels/p1/private-members?userIds=bob").status == 200)
        let kicked = try bob.waitFor("group.channelUserKicked")
        #expect(Scenarios.infos(kicked).map { $0.str("userId") } == ["bob"] && Scenarios.infos(kicked).first?.str("channelId") == "p1")
        for c in [phone, tablet, carol, dave] { #expect(c.eventNames(within: 0.3).isEmpty) }
        // From a public channel's list: nobody hears.
        #expect(try rest.call("DELETE", "/v1/groups/g1/channels/c1/private-members?userIds=alice").status == 200)
        for c in [phone, tablet, bob, carol, dave] { #expect(c.eventNames(within: 0.3).isEmpty) }

        // UG-6: paged channels, and what each user can see.
        let page = try rest.call("GET", "/v1/groups/g1/channels?page=2&pageSize=2").json
        #expect((page["channels"] as? [[String: Any]])?.compactMap { $0.str("channelId") } == ["p1"] && page.int("total") == 3)
        let bobSees = try bob.expectOK(try bob.send("group.channels", ["groupId": "g1"]))
        #expect((bobSees["channels"] as? [[String: Any]])?.compactMap { $0.str("channelId") } == ["RCDefault", "c1"])
        let carolSees = try rest.call("GET", "/v1/groups/g1/users/carol/channels").json
        #expect((carolSees["channels"] as? [[String: Any]])?.compactMap { $0.str("channelId") } == ["RCDefault", "c1", "p1"])
        #expect(try dave.send("group.channels", ["groupId": "g1"]).obj("error").int("code") == 24406)

        // UG-3: deleting the private channel tells its list (carol) only; the public one, every
        // group member (alice's two devices too).
        #expect(try rest.call("DELETE", "/v1/groups/g1/channels/p1").status == 200)
        #expect(Scenarios.infos(try carol.waitFor("group.channelDisbanded")).first?.str("channelId") == "p1")
        for c in [phone, tablet, bob, dave] { #expect(c.eventNames(within: 0.3).isEmpty) }
        #expect(try rest.call("DELETE", "/v1/groups/g1/channels/c1").status == 200)
        for c in [carol, bob, phone, tablet] { #expect(Scenarios.infos(try c.waitFor("group.channelDisbanded")).first?.str("channelId") == "c1") }
        #expect(dave.eventNames(within: 0.3).isEmpty)
        for c in [phone, tablet, bob, carol] { #expect(c.eventNames(within: 0).isEmpty) }
    }

    /// MO-3, MO-5, MO-6: community messages and controls through Nexconn's calls and the
    /// `group.send` op: who receives what (nobody outside the group, a private channel's list
    /// only), a mute holding a member's send, an edit reaching everyone who saw the message.
    static func communityChannels<G: ScenarioGateway>(_ g: G) throws {
        let rest = g.api
        #expect(try rest.call("POST", "/v1/groups", ["groupId": "cg", "name": "Guild", "creator": "alice"]).status == 201)
        #expect(try rest.call("POST", "/v1/groups/cg/members", ["userIds": ["bob", "carol"]]).status == 200)
        #expect(try rest.call("POST", "/v1/groups/cg/channels", ["channelId": "vip", "type": "private"]).status == 201)
        #expect(try rest.call("POST", "/v1/groups/cg/channels/vip/private-members", ["userIds": ["bob"]]).status == 200)
        let alice = try g.connectClient("alice"), bob = try g.connectClient("bob"), carol = try g.connectClient("carol")
        let dave = try g.connectClient("dave")

        let sent = try rest.call("POST", "/v4/community-channel/message/send",
                                 ["fromUserId": "alice", "toChannelIds": ["cg"], "messageType": "RC:TxtMsg", "content": "hello"])
        #expect(sent.json.int("code") == 0, "\(sent.text)")
        let id = try #require((sent.json.obj("result")["messageIds"] as? [[String: Any]])?.first?.str("messageId"))
        var sentAt = 0
        for c in [alice, bob, carol] {
            let data = try c.waitFor("group.message").obj("data")
            #expect(data.str("messageId") == id)
            sentAt = data.int("sentAt") ?? 0
        }
        #expect(dave.eventNames(within: 0.3).isEmpty, "dave is in no group")
        #expect(try rest.call("POST", "/v4/community-channel/message/send",
                              ["fromUserId": "alice", "toChannelIds": ["cg"], "subchannelId": "vip", "messageType": "T", "content": "s"]).json.int("code") == 0)
        #expect(try bob.waitFor("group.message").obj("data").str("channelId") == "vip")
        for c in [alice, carol, dave] { #expect(!c.eventNames(within: 0.3).contains("group.message")) }

        // MO-5: a muted member's send is refused (23408) and reaches nobody; after the unmute it does.
        #expect(try rest.call("POST", "/v4/community-channel/mute-list/add", ["channelId": "cg", "userIds": ["carol"]]).json.int("code") == 0)
        #expect(try carol.waitFor("group.moderationChanged").obj("data").str("action") == "muteAdd")
        #expect(try carol.send("group.send", ["groupId": "cg", "type": "T", "content": "x"]).obj("error").int("code") == 23408)
        for c in [alice, bob] { #expect(!c.eventNames(within: 0.3).contains("group.message")) }
        #expect(try rest.call("POST", "/v4/community-channel/mute-list/remove", ["channelId": "cg", "userIds": ["carol"]]).json.int("code") == 0)
        _ = try carol.waitFor("group.moderationChanged")
        _ = try carol.expectOK(try carol.send("group.send", ["groupId": "cg", "type": "T", "content": "back"]))
        for c in [alice, bob] { #expect(try c.waitFor("group.message").obj("data").str("content") == "back") }

        // MO-3: the sender's edit reaches everyone who saw it; history shows the latest version.
        #expect(try rest.call("POST", "/v4/community-channel/message/update",
                              ["channelId": "cg", "fromUserId": "alice", "messageId": id, "content": "hello again"]).json.int("code") == 0)
        for c in [alice, bob, carol] { #expect(try c.waitFor("message.updated").obj("data").obj("message").str("content") == "hello again") }
        #expect(!dave.eventNames(within: 0.3).contains("message.updated"))
        let history = try rest.call("POST", "/v4/community-channel/history-message/list",
                                    ["channelId": "cg", "userId": "carol", "startAt": sentAt + 86_400_000, "endAt": sentAt - 1000, "includeStart": true])
        let contents = (history.json.obj("result")["messages"] as? [[String: Any]])?.compactMap { $0.str("content") }
        #expect(contents == ["back", "hello again"], "\(history.text)")
    }

    /// MO-4: user groups bound to a private channel: who sees it follows them (the REST listing,
    /// a client's own channel list on its node), the UG-2 notices reach those who see it through
    /// a group, those who lose sight through one are told (UG-4), and bad calls change nothing.
    static func ultraGroupUserGroups<G: ScenarioGateway>(_ g: G) throws {
        let rest = g.api
        typealias J = [String: Any]
        #expect(try rest.call("POST", "/v1/groups", ["groupId": "g2", "name": "Guild", "creator": "alice"]).status == 201)
        #expect(try rest.call("POST", "/v1/groups/g2/members", ["userIds": ["bob", "carol"]]).status == 200)
        #expect(try rest.call("POST", "/v1/groups/g2/channels", ["channelId": "p", "type": "private"]).status == 201)
        #expect(try rest.call("POST", "/v1/groups/g2/user-groups", ["userGroupIds": ["team", "other"]]).status == 200)
        #expect(try rest.call("POST", "/v1/groups/g2/user-groups/team/members", ["userIds": ["bob"]]).status == 200)
        let alice = try g.connectClient("alice"), bob = try g.connectClient("bob"), carol = try g.connectClient("carol")
        func sees(_ c: G.Client) throws -> [String] {
            ((try c.expectOK(try c.send("group.channels", ["groupId": "g2"])))["channels"] as? [J])?.compactMap { $0.str("channelId") } ?? []
        }
        #expect(try sees(bob) == ["RCDefault"])
        #expect(try rest.call("POST", "/v1/groups/g2/channels/p/user-groups", ["userGroupIds": ["team"]]).status == 200)
        #expect(try sees(bob) == ["RCDefault", "p"] && sees(carol) == ["RCDefault"])
        for c in [alice, bob, carol] { #expect(c.eventNames(within: 0.3).isEmpty) }

        // UG-2 through a group: private→public tells bob (3); public→private bob 2, the others 6.
        #expect(try rest.call("PATCH", "/v1/groups/g2/channels/p", ["type": "public"]).status == 200)
        #expect(Scenarios.infos(try bob.waitFor("group.channelTypeChanged")).first?.int("changeType") == 3)
        for c in [alice, carol] { #expect(c.eventNames(within: 0.3).isEmpty) }
        #expect(try rest.call("PATCH", "/v1/groups/g2/channels/p", ["type": "private"]).status == 200)
        #expect(Scenarios.infos(try bob.waitFor("group.channelTypeChanged")).first?.int("changeType") == 2)
        for c in [alice, carol] { #expect(Scenarios.infos(try c.waitFor("group.channelTypeChanged")).first?.int("changeType") == 6) }

        // Bad calls change nothing: a stranger (24406), past the per-channel bound, an unknown group.
        let stranger = try rest.call("POST", "/v1/groups/g2/user-groups/team/members", ["userIds": ["carol", "zed"]])
        #expect(stranger.status == 403 && stranger.json.int("code") == 24406 && stranger.json.str("field") == "userIds")
        let unknown = try rest.call("POST", "/v1/groups/g2/channels/p/user-groups", ["userGroupIds": ["other", "nope"]])
        #expect(unknown.status == 404 && unknown.json.str("field") == "userGroupIds")
        let many = try rest.call("POST", "/v1/groups/g2/user-groups", ["userGroupIds": (0...Limits.maxUserGroupsPerCall).map { "x\($0)" }])
        #expect(many.status == 400 && many.json.str("field") == "userGroupIds")
        let state = try rest.call("GET", "/v1/groups/g2/user-groups").json["userGroups"] as? [J] ?? []
        #expect(state.map { $0.str("userGroupId") ?? "" } == ["team", "other"] && state.first?["userIds"] as? [String] == ["bob"])
        #expect(try sees(carol) == ["RCDefault"])

        // Losing sight through the group tells bob alone (UG-4); deleting the group, too.
        #expect(try rest.call("DELETE", "/v1/groups/g2/user-groups/team/members?userIds=bob").status == 200)
        #expect(Scenarios.infos(try bob.waitFor("group.channelUserKicked")).first?.str("channelId") == "p")
        #expect(try sees(bob) == ["RCDefault"])
        #expect(try rest.call("POST", "/v1/groups/g2/user-groups/team/members", ["userIds": ["bob"]]).status == 200)
        #expect(try sees(bob) == ["RCDefault", "p"])
        #expect(try rest.call("DELETE", "/v1/groups/g2/user-groups?userGroupIds=team").status == 200)
        #expect(Scenarios.infos(try bob.waitFor("group.channelUserKicked")).first?.str("channelId") == "p")
        #expect((try rest.call("GET", "/v1/groups/g2/channels/p/user-groups").json["userGroups"] as? [J])?.isEmpty == true)
        for c in [alice, bob, carol] { #expect(c.eventNames(within: 0.3).isEmpty) }
    }

    /// CS-1..CS-4: conversation status reaches every device of the user and syncs on connect.
    static func conversationStatuses<G: ScenarioGateway>(_ g: G) throws {
        let rest = g.api
        let phone = try g.connectClient("alice", device: "phone"), tablet = try g.connectClient("alice", device: "tablet"), bob = try g.connectClient("bob")
        #expect(phone.syncedStatuses.isEmpty && phone.conversationCursor == 0)

        // CS-1/CS-2: a server change reaches both of alice's devices as one array; bob nothing.
        let set = try rest.call("PUT", "/v1/users/alice/conversations/1/bob", ["pinned": true, "notificationLevel": 5])
        #expect(set.status == 200 && set.json.obj("status").int("version") == 1)
        for c in [phone, tablet] {
            let list = Scenarios.infos(try c.waitFor("conversation.statusChanged"))
            #expect(list.map { $0.int("conversationStatusType") } == [1, 2])
            #expect(list.map { $0.int("conversationStatusValue") } == [0, 1])
            #expect(list.first?.int("notificationLevel") == 5 && list.first?.str("targetId") == "bob")
        }
        #expect(bob.eventNames(within: 0.3).isEmpty)
        let bad = try rest.call("PUT", "/v1/users/alice/conversations/1/bob", ["notificationLevel": 3])
        #expect(bad.status == 400 && bad.json.str("field") == "notificationLevel")
        let badType = try rest.call("PUT", "/v1/users/alice/conversations/2/bob", ["pinned": true])
        #expect(badType.status == 400 && badType.json.str("field") == "conversationType")

        // CS-2 from a device: the other device hears it, the changing one gets the answer only.
        let ok = try phone.expectOK(try phone.send("conversation.set", ["conversationType": 3, "targetId": "team", "pinned": true]))
        #expect(ok.obj("status").int("version") == 2)
        #expect(Scenarios.infos(try tablet.waitFor("conversation.statusChanged")).first?.str("targetId") == "team")
        #expect(phone.eventNames(within: 0.3).isEmpty)
        #expect(bob.eventNames(within: 0).isEmpty)

        // CS-4: defaults and the effective level.
        #expect(try rest.call("POST", "/v1/groups", ["groupId": "g1", "creator": "alice"]).status == 201)
        #expect(try rest.call("POST", "/v1/groups/g1/channels", ["channelId": "c1"]).status == 201)
        #expect(try rest.call("PUT", "/v1/groups/g1/notification-level", ["notificationLevel": 1]).status == 200)
        #expect(try rest.call("PUT", "/v1/groups/g1/notification-level", ["notificationLevel": 2, "channelId": "c1"]).status == 200)
        let viaChannel = try phone.expectOK(try phone.send("conversation.get", ["conversationType": 10, "targetId": "g1", "channelId": "c1"]))
        #expect(viaChannel.obj("status").int("effectiveLevel") == 2 && viaChannel.obj("status").str("levelSource") == "channelDefault")
        #expect(try rest.call("PUT", "/v1/users/alice/conversation-types/10", ["notificationLevel": 4]).status == 200)
        let viaType = try rest.call("GET", "/v1/users/alice/conversations/10/g1?channelId=c1").json.obj("status")
        #expect(viaType.int("effectiveLevel") == 4 && viaType.str("levelSource") == "conversationType")
        #expect(try rest.call("GET", "/v1/users/bob/conversations/10/g1?channelId=c1").json.obj("status").int("effectiveLevel") == 2)
        #expect(try rest.call("PUT", "/v1/users/alice/conversations/10/g1", ["channelId": "c1", "notificationLevel": -1]).status == 200)
        _ = [phone, tablet].map { $0.drain(for: 0.3) }

        // CS-3: a device that never synced gets every status, then statusSynced with the cursor.
        let laptop = try g.connectClient("alice", device: "laptop")
        #expect(laptop.conversationCursor == 3)
        #expect(Set(laptop.syncedStatuses.compactMap { $0.str("targetId") }) == ["bob", "team", "g1"])
        #expect(laptop.syncedStatuses.count == 6)
        // From a cursor: only what changed after it.
        let resumed = try g.connectClient("alice", device: "laptop", cursor: 2)
        #expect(resumed.syncedStatuses.compactMap { $0.str("targetId") } == ["g1", "g1"] && resumed.conversationCursor == 3)
        let current = try g.connectClient("alice", device: "laptop", cursor: 3)
        #expect(current.syncedStatuses.isEmpty && current.conversationCursor == 3)
        #expect(try bob.send("connect", ["token": "x"]).obj("error").int("code") != nil)

        // What the REST API reads back (DeliveryTests reads the same after kill -9).
        let status = try rest.call("GET", "/v1/users/alice/conversations/1/bob").json.obj("status")
        #expect(status["pinned"] as? Bool == true && status.int("notificationLevel") == 5 && status.int("version") == 1)
        #expect(try rest.call("GET", "/v1/users/alice/conversation-types/10").json.int("notificationLevel") == 4)
        #expect(try rest.call("GET", "/v1/groups/g1/notification-level?channelId=c1").json.int("notificationLevel") == 2)
        // A device that synced up to version 1 gets the two statuses changed since (team, g1).
        let again = try g.connectClient("alice", device: "phone", cursor: 1)
        #expect(again.syncedStatuses.count == 4 && again.conversationCursor == 3)
        // The next change continues the version sequence.
        #expect(try rest.call("PUT", "/v1/users/alice/conversations/6/system", ["pinned": true]).json.obj("status").int("version") == 4)
    }
}
