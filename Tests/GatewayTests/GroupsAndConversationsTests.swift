import Foundation
import Testing
import TestKit

/// Ultra-group channels (SPEC §4) and conversation status (SPEC §5) in-process (real routes,
/// engine and hub; in-memory store, manual clock): REST changes, the events each device receives
/// (two devices of one user, and users who must receive nothing), the WebSocket ops and
/// connect-time sync. That all of it survives `kill -9` is DeliveryTests'
/// `killNineKeepsGroupsAndConversationStatuses`, against the real binary.
@Suite("Ultra groups and conversation status in-process")
struct GroupsAndConversationsTests {
    // UG-1, UG-2, UG-3, UG-4, UG-5, UG-6
    @Test func channelChangesReachExactlyTheSeedsAudiences() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        try Scenarios.ultraGroupChannels(g)
    }

    // MO-3, MO-5, MO-6
    @Test func communityMessagesReachWhoSeesTheChannel() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        try Scenarios.communityChannels(g)
    }

    // MO-4
    @Test func userGroupsDecideWhoSeesAPrivateChannel() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        try Scenarios.ultraGroupUserGroups(g)
    }

    // CS-1, CS-2, CS-3, CS-4
    @Test func statusChangesReachEveryDeviceOfTheUserAndSyncOnConnect() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        try Scenarios.conversationStatuses(g)
    }
}
