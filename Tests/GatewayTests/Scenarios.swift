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
    func connectClient(_ user: String) throws -> Client
}

extension ScenarioGateway {
    func restCall(_ method: String, _ path: String) throws -> RESTClient.Response { try restCall(method, path, nil) }
}

extension ProtocolClient: ScenarioClient {
    func send(_ op: String, _ args: [String: Any]) throws -> [String: Any] { try command(op, args) }
}

extension SessionClient: ScenarioClient {
    func send(_ op: String, _ args: [String: Any]) throws -> [String: Any] { try command(op, args) }
}

extension GatewayProcess: ScenarioGateway {
    func restCall(_ method: String, _ path: String, _ body: Any?) throws -> RESTClient.Response { try rest().call(method, path, body) }
    func connectClient(_ user: String) throws -> ProtocolClient { try client(user) }
}

extension InProcessGateway: ScenarioGateway {
    func restCall(_ method: String, _ path: String, _ body: Any?) throws -> RESTClient.Response { try rest().call(method, path, body) }
    func connectClient(_ user: String) throws -> SessionClient { try client(user) }
}

/// Scenarios run both in-process (ScenarioTests) and against the binary (SmokeTests).
enum Scenarios {
    static func join<C: ScenarioClient>(_ c: C, _ room: String, _ extra: [String: Any] = [:]) throws -> [String: Any] {
        var args: [String: Any] = ["roomId": room]
        for (k, v) in extra { args[k] = v }
        return try c.expectOK(try c.send("room.join", args))
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
}
