import Foundation
@testable import Gateway
import Testing
import Wire
import TestKit

/// Every WebSocket op of the published protocol, with each of its number fields set to extremes:
/// the answer is an ok or an error that names a field, never a crash, and the server keeps serving.
@Suite("Hostile WebSocket arguments", .serialized)
struct HostileInputTests {
    /// The number fields of an op's args (from the published schema), with the required strings.
    func extremes(_ args: [String: Any]) -> [[String: Any]] {
        guard let props = args["properties"] as? [String: Any] else { return [] }
        var base: [String: Any] = [:]
        for (name, schema) in props {
            guard let s = schema as? [String: Any] else { continue }
            if s["type"] as? String == "string" || s["pattern"] != nil { base[name] = "x" }
        }
        var out: [[String: Any]] = []
        for (name, schema) in props {
            guard let s = schema as? [String: Any], s["type"] as? String == "integer" || s["enum"] is [Int] else { continue }
            for v in [Int64.max, Int64.min, -1, 0] {
                var a = base
                a[name] = v
                out.append(a)
            }
        }
        return out
    }

    @Test func extremeNumbersGetErrorsNotCrashes() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess()
            defer { g.stop() }
            let rest = g.rest()
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "x", "creator": "alice"]).status == 201)
            #expect(try rest.call("POST", "/v1/groups", ["groupId": "x", "creator": "alice"]).status == 201)
            let c = try g.client("alice")
            _ = try c.expectOK(try c.command("room.join", ["roomId": "x"]))
            var tried = 0
            for op in OpTable.all where op.name != "connect" {
                guard let args = op.args else { continue }
                for a in extremes(args) {
                    var withRoom = a
                    if withRoom["roomId"] != nil { withRoom["roomId"] = "x" }
                    if withRoom["groupId"] != nil { withRoom["groupId"] = "x" }
                    let reply = try c.command(op.name, withRoom)
                    tried += 1
                    if let e = reply["error"] as? [String: Any] {
                        #expect(e.int("code") != nil, "\(op.name) \(withRoom): \(e)")
                    } else {
                        #expect(reply["ok"] != nil, "\(op.name) \(withRoom): \(reply)")
                    }
                }
            }
            #expect(tried > 40)
            #expect(try rest.call("GET", "/healthz", headers: []).status == 200)
        }
    }
}
