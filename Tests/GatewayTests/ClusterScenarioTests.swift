import Foundation
import Testing
import TestKit

/// CL-2: a cluster of three nodes as the scenarios see one gateway. Every REST call goes to node
/// 0 and the clients take turns on nodes 1 and 2, so every event a client receives crossed the
/// shared log from another node than the one the change was made on.
final class ClusterGateway: ScenarioGateway {
    let cluster: TestCluster
    private var connected = 0

    init(database: String) throws {
        cluster = try TestCluster(database: database)
    }

    /// A change is acknowledged by node 0 once node 0 has applied it; the scenarios then read
    /// through the clients' nodes, so the call returns once every node has applied it (what a
    /// client that saw the change's event on its node would find there).
    func restCall(_ method: String, _ path: String, _ body: Any?) throws -> RESTClient.Response {
        let r = try cluster[0].rest().call(method, path, body)
        if method != "GET" { try cluster.settle() }
        return r
    }

    func connectClient(_ user: String, device: String?, cursor: Int64?) throws -> ProtocolClient {
        connected += 1
        let node = cluster[1 + connected % 2]
        let c = try ProtocolClient(port: node.port)
        try c.connect(token: try cluster[0].rest().token(user, nickname: user.capitalized, device: device), device: device, conversationCursor: cursor)
        return c
    }

    func letTimePass(seconds: Int64) { Thread.sleep(forTimeInterval: Double(seconds)) }
}

/// The scenarios of ScenarioTests, GroupsAndConversationsTests and SmokeTests, unchanged, against
/// three nodes on PostgreSQL 15 (CL-2).
@Suite("Scenarios on a cluster of three nodes", .serialized)
struct ClusterScenarioTests {
    // CL-2 with RC-1, RC-2, RC-5, RC-6, RC-7
    @Test func rongCloudModeration() async throws {
        try await offPool { () throws in try Scenarios.rongCloudModeration(try ClusterGateway(database: "rc")) }
    }

    // CL-2 with NIM-2, NIM-6, NIM-9, NIM-12, NIM-15, NIM-16
    @Test func nimRolesQueueAndKicks() async throws {
        try await offPool { () throws in try Scenarios.nimRolesQueueAndKicks(try ClusterGateway(database: "nim")) }
    }

    // CL-2 with ZIM-1, ZIM-2, ZIM-4, ZIM-5, ZIM-6
    @Test func zimCreateJoinSwitchAndLeaveAll() async throws {
        try await offPool { () throws in try Scenarios.zimCreateJoinSwitchAndLeaveAll(try ClusterGateway(database: "zim")) }
    }

    // CL-2 with UG-1..UG-6
    @Test func ultraGroupChannels() async throws {
        try await offPool { () throws in try Scenarios.ultraGroupChannels(try ClusterGateway(database: "ug")) }
    }

    // CL-2 with MO-4: user groups cross the shared log (clients read their own nodes).
    @Test func ultraGroupUserGroups() async throws {
        try await offPool { () throws in try Scenarios.ultraGroupUserGroups(try ClusterGateway(database: "usergroups")) }
    }

    // CL-2 with QS-1, QS-2, QS-5: every node decides a room's budget alike.
    // CL-2 with AU-1, AU-2: who receives is decided alike on every node.
    @Test func audiences() async throws {
        try await offPool { () throws in try Scenarios.audiences(try ClusterGateway(database: "aud")) }
    }

    // CL-2 with AU-4: every node sends the same summaries.
    @Test func memberSummaries() async throws {
        try await offPool { () throws in try Scenarios.memberSummaries(try ClusterGateway(database: "msum")) }
    }

    @Test func roomQoS() async throws {
        try await offPool { () throws in try Scenarios.roomQoS(try ClusterGateway(database: "qos")) }
    }

    // CL-2 with MO-1, MO-2: a recall and a word list reach every node alike.
    @Test func moderation() async throws {
        try await offPool { () throws in try Scenarios.moderation(try ClusterGateway(database: "mod")) }
    }

    // CL-2 with MO-3, MO-5, MO-6: community messages, edits and mutes reach every node alike.
    @Test func communityChannels() async throws {
        try await offPool { () throws in try Scenarios.communityChannels(try ClusterGateway(database: "comm")) }
    }

    // CL-2 with CS-1..CS-4
    @Test func conversationStatuses() async throws {
        try await offPool { () throws in try Scenarios.conversationStatuses(try ClusterGateway(database: "cs")) }
    }
}
