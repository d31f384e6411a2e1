extension ChatDomain {
    /// Applies everything time makes happen by `now`: expiring blocks, mutes and global mutes,
    /// destroy policies (inactivity, fixed lifetime, empty-room delay), and history retention.
    /// Returns the outcome like any command. Work is proportional to what comes due.
    public func tick(now: Int64) -> Outcome {
        var out = Outcome()
        for due in deadlines.popDue(now) {
            switch due {
            case .block(let key, let user):
                guard let room = apps[key.app]?.rooms[key.roomId], let until = room.blocks[user], until <= now else { continue }
                room.blocks[user] = nil
                out.mutations.append(.deleteBlock(key, user))
                refresh(room, user, now: now, &out)
                out.webhooks.append(WebhookRecord(app: key.app, type: .moderationChanged, roomId: key.roomId, userIds: [user], time: now,
                                                  details: ["action": "blockExpired"]))
            case .tempMute(let key, let user):
                guard let room = apps[key.app]?.rooms[key.roomId], let until = room.tempMutes[user], until <= now else { continue }
                room.tempMutes[user] = nil
                out.mutations.append(.deleteTempMute(key, user))
                out.webhooks.append(WebhookRecord(app: key.app, type: .moderationChanged, roomId: key.roomId, userIds: [user], time: now,
                                                  details: ["action": "muteExpired"]))
            case .globalMute(let appKey, let user):
                guard let app = apps[appKey], let until = app.globalMutes[user], until <= now else { continue }
                app.globalMutes[user] = nil
                out.mutations.append(.deleteGlobalMute(app: appKey, user))
                out.webhooks.append(WebhookRecord(app: appKey, type: .moderationChanged, roomId: "", userIds: [user], time: now,
                                                  details: ["action": "globalMuteExpired"]))
            case .offline(let appKey, let user):
                // Sent only if the user is still gone and this is the deadline of its last departure.
                guard let app = apps[appKey], app.userSessions[user] == nil, let gone = app.goingOffline[user],
                      now - gone.at >= presenceGraceMilliseconds else { continue }
                app.goingOffline[user] = nil
                out.webhooks.append(WebhookRecord(app: appKey, type: .userOffline, roomId: "", userIds: [user], time: gone.at,
                                                  details: ["device": gone.device]))
                out.mutations.append(.deleteOnlineUser(app: appKey, user))
            case .tagMute(let key, let tag):
                guard let room = apps[key.app]?.rooms[key.roomId], let until = room.tagMutes[tag], until <= now else { continue }
                room.tagMutes[tag] = nil
                out.mutations.append(.putRoom(record(room)))
                out.webhooks.append(WebhookRecord(app: key.app, type: .moderationChanged, roomId: key.roomId, time: now,
                                                  details: ["action": "tagMuteExpired", "tag": tag]))
            case .memberSummary(let key):
                sendMemberSummary(key, now: now, &out)
            case .room(let key):
                guard let app = apps[key.app], let room = app.rooms[key.roomId], !room.keepAlive else { continue }
                let deadline: Int64?
                switch room.destroyPolicy {
                case .inactive(let m): deadline = room.lastActivity + Int64(m) * 60_000
                case .fixed(let m): deadline = room.createdAt + Int64(m) * 60_000
                case .whenEmpty(let s): deadline = (room.presentOrder.isEmpty ? room.emptySince : nil).map { $0 + Int64(s) * 1000 }
                }
                guard let deadline else { continue }
                if deadline <= now {
                    destroyRoom(room, app, type: .auto, now: now, &out)
                } else {
                    // Activity moved the deadline: look again then.
                    deadlines.push(deadline, .room(key))
                }
            }
        }
        // History older than the retention window may leave the store (at most once a minute).
        // In key order: the mutations' order must not depend on the process's hash seed (CLUSTER.md).
        for key in apps.keys.sorted() where now - (lastPrune[key] ?? 0) >= 60_000 {
            guard let app = apps[key] else { continue }
            lastPrune[key] = now
            out.mutations.append(.pruneMessages(app: key, before: now - app.settings.historyRetentionMilliseconds))
            // The create quota remembers only the last minute: users who stopped creating go.
            app.recentCreates = app.recentCreates.filter { $0.value.contains { now - $0 < 60_000 } }
            // PX-1: send buckets of users who have not sent for a while are full again: forget them.
            app.sendBuckets = app.sendBuckets.filter { var b = $0.value; return !b.isFull(now: now) }
        }
        return out
    }

    /// The next instant at which `tick` has work, if any is scheduled.
    public var nextDeadline: Int64? { deadlines.nextDeadline }
}
