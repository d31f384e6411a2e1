import Foundation
import Testing
import TestKit

/// The seed scenarios in-process (real routes, engine, hub; in-memory store, manual clock): REST
/// calls into the router, events observed by several sessions, and who receives nothing.
/// SmokeTests runs one of them against the real binary over sockets; ClusterScenarioTests runs
/// them all against three nodes.
@Suite("Gateway scenarios in-process")
struct ScenarioTests {
    // RC-1, RC-2, RC-5, RC-6, RC-7
    @Test func rongCloudModerationReachesExactlyItsAudience() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        try Scenarios.rongCloudModeration(g)
    }

    // QS-1, QS-2, QS-5
    // AU-1, AU-2
    @Test func audiences() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        try Scenarios.audiences(g)
    }

    // AU-4
    @Test func memberSummaries() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        try Scenarios.memberSummaries(g)
    }

    // MO-1, MO-2
    @Test func moderation() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        try Scenarios.moderation(g)
    }

    @Test func roomQoS() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        try Scenarios.roomQoS(g)
    }

    // NIM-6, NIM-9, NIM-12, NIM-16
    @Test func nimRolesQueueAndKicks() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        try Scenarios.nimRolesQueueAndKicks(g)
    }

    // ZIM-1, ZIM-2, ZIM-4, ZIM-5, ZIM-6
    @Test func zimCreateJoinSwitchAndLeaveAll() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        try Scenarios.zimCreateJoinSwitchAndLeaveAll(g)
    }
}
