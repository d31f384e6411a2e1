@testable import Chat
import Testing

/// PX-3: a user is online from its first connection and offline once its last one has been gone
/// for the grace; a connection within the grace sends nothing. Anonymous clients are no users.
@Suite("User online status (PX-3)")
struct PresenceTests {
    func presence(_ out: Outcome) -> [String] {
        out.webhooks.filter { $0.type == .userOnline || $0.type == .userOffline }
            .map { "\($0.type.rawValue) \($0.userIds.joined(separator: ",")) \($0.details["device"] ?? "")" }
    }

    @Test func firstConnectionOnlineLastOneOfflineAfterTheGrace() {
        let h = Harness()
        let phone = h.connect("alice", device: "phone")
        #expect(presence(h.lastOutcome) == ["user.online alice phone"])
        let laptop = h.connect("alice", device: "laptop")
        #expect(presence(h.lastOutcome).isEmpty)  // not the first connection
        _ = h.connect("bob")
        #expect(presence(h.lastOutcome) == ["user.online bob phone"])

        h.disconnect(phone)
        #expect(presence(h.lastOutcome).isEmpty)  // the laptop is still there
        h.disconnect(laptop)
        #expect(presence(h.lastOutcome).isEmpty)  // the grace starts
        let left = h.now
        h.advance(seconds: 4)
        #expect(presence(h.tick()).isEmpty)
        h.advance(seconds: 1)
        let out = h.tick()
        #expect(presence(out) == ["user.offline alice laptop"])
        #expect(out.webhooks.first?.time == left)  // when the last connection went
        #expect(h.query(.online(app: h.app, ["alice", "bob"])) == .online([(userId: "alice", connections: 0), (userId: "bob", connections: 1)]))
        h.advance(seconds: 10)
        #expect(presence(h.tick()).isEmpty)  // once
    }

    @Test func aReconnectWithinTheGraceSendsNothing() {
        let h = Harness()
        let first = h.connect("carol")
        h.disconnect(first)
        h.advance(seconds: 3)
        #expect(presence(h.tick()).isEmpty)
        let again = h.connect("carol", device: "tablet")
        #expect(presence(h.lastOutcome).isEmpty)  // back within the grace: no online either
        h.advance(seconds: 10)
        #expect(presence(h.tick()).isEmpty)  // the first departure's deadline sends nothing
        // A second departure and a second reconnect inside its grace: still nothing; then gone.
        h.disconnect(again)
        h.advance(seconds: 2)
        let third = h.connect("carol")
        h.advance(seconds: 2)
        h.disconnect(third)
        h.advance(seconds: 4)
        #expect(presence(h.tick()).isEmpty)  // 4 s after the last departure
        h.advance(seconds: 1)
        #expect(presence(h.tick()) == ["user.offline carol phone"])
    }

    @Test func zeroGraceAndAnonymousClients() {
        let h = Harness()
        h.domain.presenceGraceMilliseconds = 0
        let s = h.connect("dave")
        h.disconnect(s)
        #expect(presence(h.lastOutcome) == ["user.offline dave phone"])
        let (anon, out) = h.connectAnonymous()
        #expect(presence(out).isEmpty)
        h.disconnect(anon)
        #expect(presence(h.lastOutcome).isEmpty)
    }

    @Test func presenceQueriesAreBounded() {
        let h = Harness()
        for users in [[String](), (0...100).map { "u\($0)" }, [String(repeating: "x", count: 65)]] {
            guard case .failure(let e) = h.domain.query(.online(app: h.app, users), now: h.now) else {
                Issue.record("\(users.count) users were not refused")
                continue
            }
            #expect(e.code == .invalidParameter)
        }
    }
}
