import Chat
import Foundation
@testable import Gateway
import Testing
import TestKit

/// PX-3 over REST: who is online, one user or a batch; bad input named by field.
@Suite("User presence over REST (PX-3)")
struct PresenceRESTTests {
    @Test func presenceOfOneUserAndOfABatch() throws {
        let g = try InProcessGateway { $0.presenceGraceSeconds = 5 }
        defer { g.stop() }
        let rest = g.rest()
        let phone = try g.client("alice", device: "phone")
        _ = try g.client("alice", device: "laptop")
        let one = try rest.call("GET", "/v1/users/alice/presence")
        #expect(one.status == 200 && one.json["online"] as? Bool == true && one.json.int("connections") == 2)
        #expect(try rest.call("GET", "/v1/users/bob/presence").json["online"] as? Bool == false)
        let batch = try rest.call("POST", "/v1/users/presence/query", ["userIds": ["alice", "bob"]])
        let users = batch.json["users"] as? [[String: Any]] ?? []
        #expect(users.compactMap { $0.str("userId") } == ["alice", "bob"])
        #expect(users.map { $0["online"] as? Bool } == [true, false])
        // Another app's alice is another user.
        let other = g.rest(app: InProcessGateway.otherApp.key, secret: InProcessGateway.otherApp.secret)
        #expect(try other.call("GET", "/v1/users/alice/presence").json["online"] as? Bool == false)
        phone.drop()
        g.settle()
        #expect(try rest.call("GET", "/v1/users/alice/presence").json.int("connections") == 1)

        for (body, field) in [(["userIds": (0...100).map { "u\($0)" }], "userIds"), (["userIds": [String]()], "userIds"),
                              (["users": ["a"]], "userIds")] as [([String: Any], String)] {
            let r = try rest.call("POST", "/v1/users/presence/query", body)
            #expect(r.status == 400 && r.json.str("field") == field, "\(body.keys): \(r.text)")
        }
        #expect(try rest.call("GET", "/v1/users/" + String(repeating: "u", count: 65) + "/presence").json.str("field") == "userId")
    }
}
