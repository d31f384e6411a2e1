/// AU-4: member events that do not grow with the square of the room.
///
/// Below the app's `memberEventsThreshold` (or with it 0) every join and departure goes out as the
/// vendors send it: `room.memberChanged` to the other members and NIM's enter/exit notification.
/// Past it, each of those would reach every member, so a room filling up to N members would cost
/// N²/2 deliveries; instead the changes are counted and the room's members get one
/// `room.members` summary per `memberSummaryIntervalMilliseconds` (the counts, and the first
/// `Limits.maxMemberSummaryIds` user ids of each kind). A connection that joined with
/// `memberEvents: counts` gets no per-member event at any size, only summaries without ids.
/// Webhooks are unchanged: the app server is told of every member.

/// The changes of one room since its last summary. Codable: snapshots carry it, so every node
/// that applies the log sends the same summary.
struct PendingMemberSummary: Codable, Equatable, Sendable {
    /// Every join and departure (what counts-only connections are told).
    var joined = 0
    var left = 0
    /// Those the room's members were not told one by one (past the threshold).
    var batched = false
    var batchedJoined = 0
    var batchedLeft = 0
    var joinedIds: [String] = []
    var leftIds: [String] = []
}

extension ChatDomain {
    /// Whether a join or departure in `room` (with `count` members present, the member included)
    /// is summarized for everyone instead of told one by one.
    func summarizesMembers(_ room: Room, _ app: AppState, count: Int) -> Bool {
        let threshold = app.settings.memberEventsThreshold
        guard threshold > 0, count > threshold else { return false }
        // Only what would have been sent is summarized.
        return app.settings.memberChangeEvents || (app.settings.enterExitNotifications && room.enterExitNotifications)
    }

    /// Counts a join or departure into the room's next summary, when someone will get one.
    func noteMemberChange(_ room: Room, _ app: AppState, _ user: String, joined: Bool, batched: Bool, now: Int64) {
        guard batched || !room.countsOnly.isEmpty else { return }
        var p = room.memberSummary ?? PendingMemberSummary()
        if room.memberSummary == nil {
            deadlines.push(now + Int64(app.settings.memberSummaryIntervalMilliseconds), .memberSummary(room.key))
        }
        if joined { p.joined += 1 } else { p.left += 1 }
        if batched {
            p.batched = true
            if joined {
                p.batchedJoined += 1
                if p.joinedIds.count < Limits.maxMemberSummaryIds { p.joinedIds.append(user) }
            } else {
                p.batchedLeft += 1
                if p.leftIds.count < Limits.maxMemberSummaryIds { p.leftIds.append(user) }
            }
        }
        room.memberSummary = p
    }

    /// The room's summary is due: the members told nothing one by one get the batched changes
    /// with ids, counts-only connections every change without.
    func sendMemberSummary(_ key: RoomKey, now: Int64, _ out: inout Outcome) {
        guard let room = apps[key.app]?.rooms[key.roomId], let p = room.memberSummary else { return }
        room.memberSummary = nil
        if p.batched {
            out.deliver(.membersSummary(MembersSummaryEvent(roomId: key.roomId, memberCount: room.memberCount, joined: p.batchedJoined,
                                                            left: p.batchedLeft, joinedIds: p.joinedIds, leftIds: p.leftIds, time: now)),
                        to: .roomMemberDetail(key, except: .none, tags: nil))
        }
        if !room.countsOnly.isEmpty {
            out.deliver(.membersSummary(MembersSummaryEvent(roomId: key.roomId, memberCount: room.memberCount, joined: p.joined, left: p.left,
                                                            joinedIds: [], leftIds: [], time: now)),
                        to: .roomCountsOnly(key))
        }
    }
}
