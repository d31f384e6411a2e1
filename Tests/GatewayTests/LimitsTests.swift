import Chat
import Foundation
@testable import Gateway
import Testing
import TestKit
import Wire

/// SPEC §13: each limit is declared once and the published documents read it from there. This
/// walks every bound the WebSocket document publishes for an op's `args` (maxLength, maximum,
/// maxItems) and sends the op at the bound (not refused for that field) and one past it (refused,
/// naming the field) to the gateway, in-process.
@Suite("Published limits are the enforced limits")
struct LimitsTests {
    /// Valid `args` for each op (the room "r" exists; the caller manages it and "bob" is in it).
    static var baseline: [String: [String: Any]] { [
        "token.refresh": ["token": "x"],
        "room.join": ["roomId": "r"],
        "room.leave": ["roomId": "r"],
        "room.switch": ["from": "r", "to": ["roomId": "s"]],
        "room.send": ["roomId": "r", "content": "hello"],
        "group.send": ["groupId": "g", "type": "T", "content": "hello"],
        "room.history": ["roomId": "r"],
        "room.members": ["roomId": "r"],
        "room.membersByIds": ["roomId": "r", "userIds": ["bob"]],
        "room.info": ["roomId": "r"],
        "room.update": ["roomId": "r", "name": "n"],
        "member.update": ["roomId": "r", "nickname": "n"],
        "queue.list": ["roomId": "r"],
        "queue.offer": ["roomId": "r", "key": "k", "value": "v"],
        "queue.batchUpdate": ["roomId": "r", "elements": ["k": "v"]],
        "queue.poll": ["roomId": "r"],
        "queue.drop": ["roomId": "r"],
        "attributes.set": ["roomId": "r", "entries": ["a": "b"]],
        "attributes.remove": ["roomId": "r", "keys": ["a"]],
        "attributes.get": ["roomId": "r"],
        "manage.setRole": ["roomId": "r", "userId": "bob", "role": "common"],
        "manage.kick": ["roomId": "r", "userId": "bob"],
        "manage.block": ["roomId": "r", "userIds": ["bob"]],
        "manage.unblock": ["roomId": "r", "userIds": ["bob"]],
        "manage.mute": ["roomId": "r", "userIds": ["bob"]],
        "manage.unmute": ["roomId": "r", "userIds": ["bob"]],
        "manage.roomMute": ["roomId": "r", "muted": false],
        "conversation.set": ["conversationType": 10, "targetId": "g", "pinned": true],
        "conversation.get": ["conversationType": 10, "targetId": "g"],
        "group.channels": ["groupId": "g"],
        "room.recall": ["roomId": "r", "messageId": "m"],
    ] }

    /// A value exactly at (`over` false) or one past (`over` true) the bound of `schema`.
    static func value(_ schema: [String: Any], over: Bool) -> Any? {
        let extra = over ? 1 : 0
        if let n = (schema["maxLength"] as? NSNumber)?.intValue { return String(repeating: "a", count: n + extra) }
        if let n = (schema["maximum"] as? NSNumber)?.intValue { return n + extra }
        if let n = (schema["maxItems"] as? NSNumber)?.intValue { return (0..<(n + extra)).map { "u\($0)" } }
        return nil
    }

    @Test func everyPublishedBoundOfEveryOpIsTheEnforcedOne() async throws {
        try await offPool { () throws in
            var checked = 0
            for op in OpTable.all where op.name != "connect" {
                guard let schema = op.args, let props = schema["properties"] as? [String: [String: Any]] else { continue }
                for (name, propSchema) in props.sorted(by: { $0.key < $1.key }) {
                    guard let over = Self.value(propSchema, over: true), let at = Self.value(propSchema, over: false) else { continue }
                    let g = try InProcessGateway()
                    // Stopped here: its open sessions and their transports hold one another (and the
                    // gateway) until they close, so it would not be freed at the end of the iteration.
                    defer { g.stop() }
                    #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
                    #expect(try g.rest().call("POST", "/v1/groups", ["groupId": "g"]).status == 201)
                    #expect(try g.rest().call("POST", "/v1/groups/g/members", ["userIds": ["ann"]]).status == 200)
                    let c = try g.client("ann"), bob = try g.client("bob")
                    try c.expectOK(c.command("room.join", ["roomId": "r"]))
                    try bob.expectOK(bob.command("room.join", ["roomId": "r"]))
                    #expect(try g.rest().call("PUT", "/v1/rooms/r/members/ann/role", ["role": "manager"]).status == 200)
                    var args = Self.baseline[op.name] ?? [:]
                    args[name] = over
                    let refused = try c.command(op.name, args)
                    let error = refused["error"] as? [String: Any] ?? [:]
                    let code = (error["code"] as? NSNumber)?.intValue
                    #expect(code == ErrorCode.invalidParameter.rawValue || code == ErrorCode.limitExceeded.rawValue,
                            "\(op.name).\(name) one past its published bound was not refused: \(refused)")
                    #expect((error["field"] as? String)?.contains(name) == true, "\(op.name).\(name): \(refused)")
                    args[name] = at
                    let atBound = try c.command(op.name, args)
                    let e2 = atBound["error"] as? [String: Any] ?? [:]
                    let refusedForIt = (e2["code"] as? NSNumber)?.intValue == ErrorCode.invalidParameter.rawValue
                        && (e2["field"] as? String)?.contains(name) == true
                    #expect(!refusedForIt, "\(op.name).\(name) at its published bound was refused: \(atBound)")
                    checked += 1
                }
            }
            #expect(checked >= 20)
        }
    }
}
