import Chat
import Foundation
import Replication

/// `chat-bench --replay [entries] [seed]`: a log of pseudo-random entries (a seeded generator,
/// so every run makes the same log) applied as a cluster node applies the shared log — each
/// command through the log's codec, ids from the entry — printing one line per outcome. Two
/// processes must print the same lines (CLUSTER.md): Swift seeds hashing per process, so this
/// catches any `Dictionary` or `Set` order that reaches an outcome.
enum Replay {
    struct SplitMix64 {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    }

    static func run(entries count: Int, seed: UInt64) throws {
        var rng = SplitMix64(state: seed)
        let ids = EntryIDs()
        let domain = ChatDomain(makeID: { ids.next() })
        let encoder = JSONEncoder(), decoder = JSONDecoder()
        var now: Int64 = 1_800_000_000_000
        var settings = AppSettings()
        settings.multipleRoomsPerUser = true
        settings.maxRoomsPerUser = 3
        var log: [Command?] = [.configureApp(app: "app", settings)]
        for r in 0..<4 {
            var c = RoomConfig(roomId: "r\(r)")
            c.attributes = ["a\(r)": "x", "b\(r)": "y", "c\(r)": "z"]
            log.append(.createRoom(app: "app", c))
        }
        let users = (0..<12).map { "u\($0)" }
        var sessions: [SessionID] = []
        var nextSession: UInt64 = 1
        var lines: [String] = []
        var position: Int64 = 0
        func apply(_ command: Command?) throws {
            position += 1
            now += Int64(1 + rng.below(3000))
            ids.begin(position: position, at: now)
            let outcome: Outcome
            if let command {
                outcome = domain.apply(try decoder.decode(Command.self, from: try encoder.encode(command)), now: now)
            } else {
                outcome = domain.tick(now: now)
            }
            lines.append("\(position) \(outcome.reply) \(outcome.effects) \(outcome.mutations) \(outcome.webhooks)")
        }
        for c in log { try apply(c) }
        for _ in 0..<count {
            let room = "r\(rng.below(5))"  // r4 does not exist: refusals too
            let user = users[rng.below(users.count)]
            let session = sessions.isEmpty ? nil : sessions[rng.below(sessions.count)]
            let command: Command?
            switch rng.below(16) {
            case 0, 1:
                let s = SessionID(nextSession)
                nextSession += 1
                sessions.append(s)
                command = .connect(s, app: "app", userId: user, deviceId: "d\(rng.below(3))", anonymous: nil)
            case 2, 3, 4:
                command = session.map { .join($0, roomId: room, EnterProfile(nickname: user), .join) }
            case 5, 6, 7:
                command = session.map { .sendMessage(app: "app", roomId: room, .session($0), .text, content: "m\(position)") }
            case 8: command = session.map { .leave($0, roomId: room) }
            case 9: command = .mute(app: "app", roomId: room, [user, users[rng.below(users.count)]], .minutes(1), .server, rc: RCNotify(), nim: nil)
            case 10: command = .block(app: "app", roomId: room, [user], minutes: 1, .server, rc: nil, nim: NIMNotify())
            case 11:
                command = session.map {
                    .setAttributes(app: "app", roomId: room, [KeyValue("k\(rng.below(4))", "v"), KeyValue("k\(rng.below(4) + 4)", "w")],
                                   owner: nil, autoDelete: rng.below(2) == 0, .session($0))
                }
            case 12: command = session.map { .queueOffer(app: "app", roomId: room, key: "q\(rng.below(5))", value: "v", transient: true, .session($0)) }
            case 13:
                if let s = session {
                    sessions.removeAll { $0 == s }
                    command = .disconnect(s)
                } else {
                    command = nil
                }
            case 14: command = .kick(app: "app", roomId: room, target: user, .server, notifyExt: "")
            default: command = nil  // a tick
            }
            try apply(command)
        }
        for line in lines { print(line) }
    }
}
