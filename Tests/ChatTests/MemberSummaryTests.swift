import Testing
@testable import Chat

/// AU-4 in the domain: past the app's member threshold a room's members get one `room.members`
/// summary per interval instead of an event per member; a counts-only connection gets counts
/// only at any size; below the threshold every vendor member event is unchanged.
@Suite struct MemberSummaryTests {
    func harness(threshold: Int, intervalMs: Int = 1000) -> Harness {
        let h = Harness {
            $0.memberEventsThreshold = threshold
            $0.memberSummaryIntervalMilliseconds = intervalMs
        }
        h.createRoom("r")
        return h
    }

    /// Connects and joins `users`; returns their sessions.
    func join(_ h: Harness, _ users: [String], _ profile: EnterProfile = EnterProfile()) -> [SessionID] {
        users.map { u in
            let s = h.connect(u)
            #expect(h.join(s, "r", profile).succeeded)
            return s
        }
    }

    @Test("AU-4: with no threshold every join and departure is told one by one, as the vendors do, and no summary is sent")
    func belowThresholdUnchanged() {
        let h = harness(threshold: 0)
        let sessions = join(h, (0..<6).map { "u\($0)" })
        // The first member saw the other five join: a memberChanged and an enter notification each.
        #expect(h.received(sessions[0]).memberChanges.map { $0.changes.map(\.userId) } == (1..<6).map { ["u\($0)"] })
        #expect(h.received(sessions[0]).notifications.filter { $0.type == .enter }.count == 5)
        h.leave(sessions[5], "r")
        #expect(h.received(sessions[0]).memberChanges.last?.changes.first?.action == .quit)
        h.advance(seconds: 5)
        h.tick()
        #expect(sessions.allSatisfy { h.received($0).summaries.isEmpty })
    }

    @Test("AU-4: past the threshold members get one room.members per interval with exact counts and the ids, never an event per member")
    func pastThresholdSummarized() {
        let h = harness(threshold: 3)
        let first = join(h, ["a", "b", "c"])
        // Up to the threshold: told one by one.
        #expect(h.received(first[0]).memberChanges.count == 2)
        h.clearInboxes()
        let more = join(h, ["d", "e", "f", "g"])
        let everyone = first + more
        // Past it: nobody is told of d…g one by one, though webhooks hear of each.
        for s in everyone {
            #expect(h.received(s).memberChanges.isEmpty)
            #expect(h.received(s).notifications.filter { $0.type == .enter }.isEmpty)
            #expect(h.received(s).summaries.isEmpty)
        }
        h.leave(more[3], "r")
        #expect(h.lastOutcome.webhooks.map(\.type) == [.memberLeft])
        // Before the interval has passed: nothing yet.
        h.now += 999
        h.tick()
        #expect(everyone.allSatisfy { h.received($0).summaries.isEmpty })
        h.now += 1
        h.tick()
        for s in everyone.dropLast() {
            let got = h.received(s).summaries
            #expect(got.count == 1)
            #expect(got.first.map { ($0.memberCount, $0.joined, $0.left, $0.joinedIds, $0.leftIds) }
                    ?? (0, 0, 0, [], []) == (6, 4, 1, ["d", "e", "f", "g"], ["g"]))
        }
        // The one who left hears nothing of the room.
        #expect(h.received(more[3]).summaries.isEmpty)
        // Nothing changed: no summary at the next interval.
        h.clearInboxes()
        h.advance(seconds: 2)
        h.tick()
        #expect(everyone.allSatisfy { h.received($0).summaries.isEmpty })
    }

    @Test("AU-4: a summary names at most the declared number of ids of each kind; its counts stay exact")
    func idsAreBounded() {
        let h = harness(threshold: 1)
        let n = Limits.maxMemberSummaryIds + 20
        let sessions = join(h, (0..<n).map { "u\($0)" })
        h.advance(seconds: 1)
        h.tick()
        let got = h.received(sessions[0]).summaries
        #expect(got.count == 1)
        #expect(got.first?.joined == n - 1)
        #expect(got.first?.joinedIds.count == Limits.maxMemberSummaryIds)
        #expect(got.first?.joinedIds.first == "u1")
        #expect(got.first?.memberCount == n)
    }

    @Test("AU-4: a counts-only connection gets counts without ids at any size, and never an event per member; the others are unchanged")
    func countsOnly() {
        let h = harness(threshold: 0)
        let counter = join(h, ["counter"], EnterProfile(memberCountsOnly: true))[0]
        let watcher = join(h, ["watcher"])[0]
        let others = join(h, ["x", "y"])
        h.leave(others[1], "r")
        // The counts-only connection was told of nobody one by one.
        #expect(h.received(counter).memberChanges.isEmpty)
        #expect(h.received(counter).notifications.isEmpty)
        // The others were, as before, and get no summary.
        #expect(h.received(watcher).memberChanges.map { $0.changes.map(\.userId) } == [["x"], ["y"], ["y"]])
        h.advance(seconds: 1)
        h.tick()
        #expect(h.received(watcher).summaries.isEmpty)
        #expect(h.received(others[0]).summaries.isEmpty)
        let got = h.received(counter).summaries
        #expect(got.count == 1)
        // Its own join counts too.
        #expect(got.first.map { ($0.memberCount, $0.joined, $0.left, $0.joinedIds, $0.leftIds) } ?? (0, 0, 0, ["?"], ["?"]) == (3, 4, 1, [], []))
    }

    @Test("AU-4: past the threshold a counts-only connection gets its copy without ids, the others theirs with ids")
    func countsOnlyPastThreshold() {
        let h = harness(threshold: 2)
        let counter = join(h, ["counter"], EnterProfile(memberCountsOnly: true))[0]
        let plain = join(h, ["p", "q", "s"])
        h.advance(seconds: 1)
        h.tick()
        let counts = h.received(counter).summaries
        #expect(counts.count == 1 && counts.first?.joinedIds == [] && counts.first?.joined == 4)
        // p joined as the room's second member (told one by one to counter, which takes counts
        // only), q and s as its third and fourth (summarized).
        let full = h.received(plain[0]).summaries
        #expect(full.count == 1 && full.first?.joinedIds == ["q", "s"] && full.first?.joined == 2 && full.first?.memberCount == 4)
        #expect(h.received(plain[0]).memberChanges.isEmpty)
        #expect(h.received(counter).memberChanges.isEmpty)
    }

    @Test("AU-4: bad thresholds and intervals name their field and change nothing")
    func badSettings() {
        let h = harness(threshold: 0)
        let before = h.domain.appSettings(h.app)
        for (patch, field) in [({ var p = AppSettingsPatch(); p.memberEventsThreshold = -1; return p }(), "memberEventsThreshold"),
                               ({ var p = AppSettingsPatch(); p.memberEventsThreshold = SettingsLimits.memberEventsThreshold.upperBound + 1; return p }(),
                                "memberEventsThreshold"),
                               ({ var p = AppSettingsPatch(); p.memberSummaryIntervalMilliseconds = 99; p.maxRooms = 5; return p }(),
                                "memberSummaryIntervalMs")] {
            let out = h.run(.updateAppSettings(app: h.app, patch))
            #expect(out.error?.field == field)
            #expect(h.domain.appSettings(h.app) == before)
        }
    }
}
