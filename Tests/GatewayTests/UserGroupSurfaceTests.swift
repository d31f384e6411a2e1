import Chat
import Foundation
import Testing
import TestKit
import Wire

/// MO-4: ultra-group user groups bound to private channels over HTTP, on RongCloud's
/// `/ultragroup/usergroup/*` and `/ultragroup/channel/usergroup/*`, Nexconn's
/// `/v4/community-channel/user-group/*` and `/channel/user-group/*`, and the native API.
@Suite("Ultra-group user groups on the surfaces (MO-4)")
struct UserGroupSurfaceTests {
    typealias J = [String: Any]

    @Test("MO-4: RongCloud's user-group calls create, fill, bind, list, unbind and delete, with the SDKs' shapes")
    func rongCloud() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        func rc(_ path: String, _ form: [(String, String)] = [], json: J? = nil) throws -> J {
            let r = try rest.vendor(.rongCloud, path, form, json: json)
            #expect(r.status == 200 && r.json.int("code") == 200, "\(path): \(r.text)")
            return r.json
        }
        _ = try rc("/ultragroup/create.json", [("userId", "owner"), ("groupId", "ug"), ("groupName", "Guild")])
        _ = try rc("/ultragroup/join.json", [("userId", "ann"), ("userId", "bob"), ("groupId", "ug")])
        _ = try rc("/ultragroup/channel/create.json", [("groupId", "ug"), ("busChannel", "secret"), ("type", "1")])
        // The Go and Java server SDKs send add.json as JSON; a form may carry userGroups as text.
        _ = try rc("/ultragroup/usergroup/add.json", json: ["groupId": "ug", "userGroups": [["userGroupId": "t1"], ["userGroupId": "t2"]]])
        _ = try rc("/ultragroup/usergroup/add.json", [("groupId", "ug"), ("userGroups", #"[{"userGroupId":"t3"}]"#)])
        let listed = try rc("/ultragroup/usergroup/query.json", [("groupId", "ug"), ("page", "1"), ("pageSize", "10")])
        #expect((listed["userGroups"] as? [J])?.compactMap { $0.str("userGroupId") } == ["t1", "t2", "t3"], "\(listed)")
        // Comma-joined userIds (the Go SDK), repeated keys (other clients) too.
        _ = try rc("/ultragroup/usergroup/user/add.json", [("groupId", "ug"), ("userGroupId", "t1"), ("userIds", "ann,bob")])
        _ = try rc("/ultragroup/usergroup/user/add.json", [("groupId", "ug"), ("userGroupId", "t2"), ("userIds", "bob"), ("userIds", "owner")])
        let stranger = try rest.vendor(.rongCloud, "/ultragroup/usergroup/user/add.json", [("groupId", "ug"), ("userGroupId", "t1"), ("userIds", "owner,dave")])
        #expect(stranger.status == 403 && stranger.json.int("code") == 24406 && stranger.json.str("field") == "userIds", "\(stranger.text)")
        #expect(try rc("/ultragroup/user/usergroup/query.json", [("groupId", "ug"), ("userId", "owner")])["data"] as? [String] == ["t2"])

        func sees(_ user: String) throws -> [String] {
            try rc("/ultragroup/user/channel/query.json", [("groupId", "ug"), ("userId", user), ("page", "1"), ("pageSize", "50")])["data"] as? [String] ?? []
        }
        #expect(try !sees("ann").contains("secret"))
        _ = try rc("/ultragroup/channel/usergroup/bind.json", [("groupId", "ug"), ("busChannel", "secret"), ("userGroupIds", "t1,t3")])
        #expect(try rc("/ultragroup/channel/usergroup/query.json", [("groupId", "ug"), ("busChannel", "secret")])["data"] as? [String] == ["t1", "t3"])
        #expect(try rc("/ultragroup/usergroup/channel/query.json", [("groupId", "ug"), ("userGroupId", "t1")])["data"] as? [String] == ["secret"])
        #expect(try sees("ann").contains("secret") && sees("bob").contains("secret") && !sees("owner").contains("secret"))
        // The native API shows the same state.
        let native = try rest.call("GET", "/v1/groups/ug/user-groups").json
        #expect((native["userGroups"] as? [J])?.first?["userIds"] as? [String] == ["ann", "bob"], "\(native)")

        _ = try rc("/ultragroup/usergroup/user/del.json", [("groupId", "ug"), ("userGroupId", "t1"), ("userIds", "ann")])
        #expect(try !sees("ann").contains("secret") && sees("bob").contains("secret"))
        _ = try rc("/ultragroup/channel/usergroup/unbind.json", [("groupId", "ug"), ("busChannel", "secret"), ("userGroupIds", "t1")])
        #expect(try !sees("bob").contains("secret"))
        _ = try rc("/ultragroup/usergroup/del.json", [("groupId", "ug"), ("userGroupIds", "t1,t3")])
        #expect(try rc("/ultragroup/channel/usergroup/query.json", [("groupId", "ug"), ("busChannel", "secret")])["data"] as? [String] == [])
        #expect((try rc("/ultragroup/usergroup/query.json", [("groupId", "ug")])["userGroups"] as? [J])?.count == 1)
    }

    @Test("MO-4: bad input on every RongCloud user-group endpoint names the field with RongCloud's codes and changes nothing")
    func rongCloudRefusals() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        _ = try rest.vendor(.rongCloud, "/ultragroup/create.json", [("userId", "owner"), ("groupId", "ug"), ("groupName", "Guild")])
        _ = try rest.vendor(.rongCloud, "/ultragroup/channel/create.json", [("groupId", "ug"), ("busChannel", "c"), ("type", "1")])
        _ = try rest.vendor(.rongCloud, "/ultragroup/usergroup/add.json", json: ["groupId": "ug", "userGroups": [["userGroupId": "t1"]]])
        let eleven = (0...10).map { "x\($0)" }.joined(separator: ",")
        let cases: [(String, [(String, String)], Int, String)] = [
            ("/ultragroup/usergroup/add.json", [("groupId", "ug")], 1002, "userGroups"),
            ("/ultragroup/usergroup/add.json", [("groupId", "ug"), ("userGroups", "[1]")], 1002, "userGroups"),
            ("/ultragroup/usergroup/add.json", [("groupId", "ug"), ("userGroups", #"[{"userGroupId":"a b"}]"#)], 1002, "userGroups"),
            ("/ultragroup/usergroup/add.json", [("groupId", "nope"), ("userGroups", #"[{"userGroupId":"a"}]"#)], 40401, "groupId"),
            ("/ultragroup/usergroup/del.json", [("groupId", "ug")], 1002, "userGroupIds"),
            ("/ultragroup/usergroup/del.json", [("groupId", "ug"), ("userGroupIds", eleven)], 1002, "userGroupIds"),
            ("/ultragroup/usergroup/query.json", [("groupId", "ug"), ("pageSize", "51")], 1002, "pageSize"),
            ("/ultragroup/usergroup/query.json", [("page", "1")], 1002, "groupId"),
            ("/ultragroup/usergroup/user/add.json", [("groupId", "ug"), ("userGroupId", "t1")], 1002, "userIds"),
            ("/ultragroup/usergroup/user/add.json", [("groupId", "ug"), ("userGroupId", "nope"), ("userIds", "owner")], 40401, "userGroupId"),
            ("/ultragroup/usergroup/user/del.json", [("groupId", "ug"), ("userIds", "owner")], 1002, "userGroupId"),
            ("/ultragroup/channel/usergroup/bind.json", [("groupId", "ug"), ("busChannel", "c"), ("userGroupIds", "t1,nope")], 40401, "userGroupIds"),
            ("/ultragroup/channel/usergroup/bind.json", [("groupId", "ug"), ("busChannel", "missing"), ("userGroupIds", "t1")], 40401, "busChannel"),
            ("/ultragroup/channel/usergroup/unbind.json", [("groupId", "ug"), ("userGroupIds", "t1")], 1002, "busChannel"),
            ("/ultragroup/channel/usergroup/query.json", [("groupId", "ug"), ("busChannel", "c"), ("page", "0")], 1002, "page"),
            ("/ultragroup/user/usergroup/query.json", [("groupId", "ug")], 1002, "userId"),
            ("/ultragroup/usergroup/channel/query.json", [("groupId", "ug"), ("userGroupId", "nope")], 40401, "userGroupId"),
        ]
        for (path, form, code, field) in cases {
            let r = try rest.vendor(.rongCloud, path, form)
            #expect(r.json.int("code") == code && r.json.str("field") == field, "\(path) \(form): \(r.text)")
        }
        // Nothing changed: one user group, unbound, empty.
        let state = try rest.call("GET", "/v1/groups/ug/user-groups").json
        #expect((state["userGroups"] as? [J])?.map { $0.str("userGroupId") ?? "" } == ["t1"], "\(state)")
        #expect((state["userGroups"] as? [J])?.first?["channelIds"] as? [String] == [])
    }

    @Test("MO-4: Nexconn's user-group calls with ncsdk's models, and refusals naming the field")
    func nexconn() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        func nx(_ path: String, _ body: J) throws -> J {
            let r = try rest.vendor(.nexconn, path, json: body)
            #expect(r.status == 200 && r.json.int("code") == 0, "\(path): \(r.text)")
            return (r.json["result"] as? J) ?? [:]
        }
        _ = try nx("/v4/community-channel/create", ["channelId": "cc", "name": "Community", "userId": "owner"])
        _ = try nx("/v4/community-channel/join", ["channelId": "cc", "userId": "m1"])
        _ = try nx("/v4/community-channel/subchannel/create", ["channelId": "cc", "subchannelId": "s1", "channelVisibility": 1])
        _ = try nx("/v4/community-channel/user-group/add", ["channelId": "cc", "userGroups": [["userGroupId": "g1"], ["userGroupId": "g2"]]])
        let list = try nx("/v4/community-channel/user-group/list", ["channelId": "cc", "page": 1, "pageSize": 10, "order": 0])
        #expect((list["userGroups"] as? [J])?.compactMap { $0.str("userGroupId") } == ["g1", "g2"], "\(list)")
        _ = try nx("/v4/community-channel/user-group/user/add", ["channelId": "cc", "userGroupId": "g1", "userIds": ["m1"]])
        _ = try nx("/v4/community-channel/channel/user-group/bind", ["channelId": "cc", "subchannelId": "s1", "userGroupIds": ["g1", "g2"]])
        #expect(try nx("/v4/community-channel/channel/user-group/list", ["channelId": "cc", "subchannelId": "s1"])["userGroupIds"] as? [String] == ["g1", "g2"])
        #expect(try nx("/v4/community-channel/user-group/subchannel/list", ["channelId": "cc", "userGroupId": "g1"])["subchannelIds"] as? [String] == ["s1"])
        #expect(try nx("/v4/community-channel/user/user-group/list", ["channelId": "cc", "userId": "m1"])["userGroupIds"] as? [String] == ["g1"])
        let m1Sees = try nx("/v4/community-channel/user/subchannel/list", ["channelId": "cc", "userId": "m1"])["subChannels"] as? [String] ?? []
        #expect(m1Sees.contains("s1"), "\(m1Sees)")
        _ = try nx("/v4/community-channel/channel/user-group/unbind", ["channelId": "cc", "subchannelId": "s1", "userGroupIds": ["g1"]])
        _ = try nx("/v4/community-channel/user-group/user/remove", ["channelId": "cc", "userGroupId": "g1", "userIds": ["m1"]])
        _ = try nx("/v4/community-channel/user-group/remove", ["channelId": "cc", "userGroupIds": ["g1"]])
        #expect(try nx("/v4/community-channel/channel/user-group/list", ["channelId": "cc", "subchannelId": "s1"])["userGroupIds"] as? [String] == ["g2"])

        let cases: [(String, J, Int, String)] = [
            ("/v4/community-channel/user-group/add", ["channelId": "cc", "userGroups": ["g3"]], 1002, "userGroups"),
            ("/v4/community-channel/user-group/add", ["channelId": "cc", "userGroups": (0...10).map { ["userGroupId": "n\($0)"] }], 1002, "userGroups"),
            ("/v4/community-channel/user-group/remove", ["channelId": "cc", "userGroupIds": "g2"], 1002, "userGroupIds"),
            ("/v4/community-channel/user-group/list", ["channelId": "cc", "order": "asc"], 1002, "order"),
            ("/v4/community-channel/user-group/list", ["channelId": "nope"], 40401, "channelId"),
            ("/v4/community-channel/user-group/user/add", ["channelId": "cc", "userGroupId": "g2", "userIds": ["stranger"]], 24406, "userIds"),
            ("/v4/community-channel/user-group/user/remove", ["channelId": "cc", "userGroupId": "g2", "userIds": []], 1002, "userIds"),
            ("/v4/community-channel/user-group/subchannel/list", ["channelId": "cc"], 1002, "userGroupId"),
            ("/v4/community-channel/channel/user-group/bind", ["channelId": "cc", "subchannelId": "nope", "userGroupIds": ["g2"]], 40401, "subchannelId"),
            ("/v4/community-channel/channel/user-group/list", ["channelId": "cc", "subchannelId": "s1", "pageSize": 0], 1002, "pageSize"),
            ("/v4/community-channel/channel/user-group/unbind", ["channelId": "cc", "subchannelId": "s1", "userGroupIds": ["g2", "g2"]], 1002, "userGroupIds"),
            ("/v4/community-channel/user/user-group/list", ["channelId": "cc"], 1002, "userId"),
        ]
        for (path, body, code, field) in cases {
            let r = try rest.vendor(.nexconn, path, json: body)
            #expect(r.json.int("code") == code && r.json.str("field") == field, "\(path) \(body): \(r.text)")
        }
        #expect(try nx("/v4/community-channel/channel/user-group/list", ["channelId": "cc", "subchannelId": "s1"])["userGroupIds"] as? [String] == ["g2"])
        #expect((try nx("/v4/community-channel/user-group/list", ["channelId": "cc"])["userGroups"] as? [J])?.count == 1)
    }

    @Test("MO-4: the native API creates, fills, binds, lists, unbinds and deletes user groups")
    func native() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/groups", ["groupId": "ug", "creator": "owner"]).status == 201)
        #expect(try rest.call("POST", "/v1/groups/ug/members", ["userIds": ["ann", "bob"]]).status == 200)
        #expect(try rest.call("POST", "/v1/groups/ug/channels", ["channelId": "c", "type": "private"]).status < 300)
        let created = try rest.call("POST", "/v1/groups/ug/user-groups", ["userGroupIds": ["t1", "t2"]])
        #expect(created.status == 200, "\(created.text)")
        let added = try rest.call("POST", "/v1/groups/ug/user-groups/t1/members", ["userIds": ["ann"]])
        #expect(added.status == 200, "\(added.text)")
        let stranger = try rest.call("POST", "/v1/groups/ug/user-groups/t1/members", ["userIds": ["zed"]])
        #expect(stranger.status == 403 && stranger.json.int("code") == 24406 && stranger.json.str("field") == "userIds", "\(stranger.text)")
        let bound = try rest.call("POST", "/v1/groups/ug/channels/c/user-groups", ["userGroupIds": ["t1"]])
        #expect(bound.status == 200, "\(bound.text)")
        let onChannel = try rest.call("GET", "/v1/groups/ug/channels/c/user-groups").json
        #expect((onChannel["userGroups"] as? [J])?.map { $0.str("userGroupId") ?? "" } == ["t1"], "\(onChannel)")
        let annSees = try rest.call("GET", "/v1/groups/ug/users/ann/channels").json
        #expect((annSees["channels"] as? [J])?.contains { $0.str("channelId") == "c" } == true, "\(annSees)")
        #expect(try rest.call("DELETE", "/v1/groups/ug/user-groups/t1/members?userIds=ann").status == 200)
        #expect(try rest.call("DELETE", "/v1/groups/ug/channels/c/user-groups?userGroupIds=t1").status == 200)
        #expect(try rest.call("DELETE", "/v1/groups/ug/user-groups?userGroupIds=t2").status == 200)
        let left = try rest.call("GET", "/v1/groups/ug/user-groups?page=1&pageSize=10").json
        #expect((left["userGroups"] as? [J])?.map { $0.str("userGroupId") ?? "" } == ["t1"] && left.int("total") == 1, "\(left)")
        let bad = try rest.call("POST", "/v1/groups/ug/user-groups", ["userGroupIds": (0...10).map { "n\($0)" }])
        #expect(bad.status == 400 && bad.json.str("field") == "userGroupIds", "\(bad.text)")
    }
}
