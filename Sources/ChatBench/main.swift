import Chat
#if canImport(Glibc)
import Glibc
#endif

/// Benchmark of the chat domain alone, on one thread: commands per second for enter/leave,
/// mute/unmute and send, and the cost of enter/leave in rooms of 10 and 100,000 members
/// (it must not grow with room size). Run: swift run -c release chat-bench [--quick]
/// (`--replay [entries] [seed]`: the cluster's replay check, see Replay.swift).
func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

final class IDs {
    var n = 0
}

final class Benchmark {
    let quick = CommandLine.arguments.contains("--quick")
    let app = "bench"
    var now: Int64 = 1_800_000_000_000
    var sink = 0
    var results: [(String, Double)] = []
    /// The share of the sends that were accepted, per send case.
    var shares: [(String, Double)] = []
    var seconds: Double { quick ? 0.5 : 3.0 }

    func makeDomain(_ configure: (inout AppSettings) -> Void = { _ in }) -> ChatDomain {
        let ids = IDs()
        let d = ChatDomain(makeID: {
            ids.n += 1
            return String(ids.n)
        })
        var s = AppSettings()
        configure(&s)
        _ = d.apply(.configureApp(app: app, s), now: now)
        return d
    }

    /// MO-2: `n` distinct words of 2 to 8 characters, the first two ("spam", "scam") in the
    /// message below and the others each starting with a CJK character (so they are looked for
    /// and never found in it: the cost measured is the scan, not the replacing).
    func sensitiveWords(_ n: Int) -> [SensitiveWord] {
        let letters = Array("abcdefghijklmnopqrstuvwxyz敏感词语禁止")
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        var seen = Set<String>()
        var out: [SensitiveWord] = [SensitiveWord(word: "spam", replacement: "****"), SensitiveWord(word: "scam", replacement: "****")]
        seen.formUnion(["spam", "scam"])
        while out.count < n {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            let length = Int(state % 7) + 2
            let cjk = Array("敏感词语禁止")
            var w = String(cjk[Int(state % UInt64(cjk.count))])
            var x = state >> 3
            for _ in 1..<length {
                w.append(letters[Int(x % UInt64(letters.count))])
                x /= UInt64(letters.count)
            }
            if seen.insert(w).inserted { out.append(SensitiveWord(word: w, replacement: "*")) }
        }
        return Array(out.prefix(n))
    }

    /// MO-2: 1 KiB of ordinary text with two replaced words in it.
    func sensitiveMessage() -> String {
        var text = "hello everyone, this is a spam test of the room "
        let filler = "the quick brown fox jumps over the lazy dog "
        while text.utf8.count + filler.utf8.count <= 1000 { text += filler }
        text += "scam"
        while text.utf8.count < 1024 { text += "." }
        return text
    }

    /// Enter/leave pairs by one session in a room that already holds `members` others.
    func enterLeave(members: Int) -> Double {
        let d = makeDomain()
        var c = RoomConfig(roomId: "room")
        c.keepAlive = true
        _ = d.apply(.createRoom(app: app, c), now: now)
        for i in 0..<members {
            let s = SessionID(UInt64(i + 10))
            _ = d.apply(.connect(s, app: app, userId: "m\(i)", deviceId: "d", anonymous: nil), now: now)
            _ = d.apply(.join(s, roomId: "room", EnterProfile(), .join), now: now)
        }
        let me = SessionID(1)
        _ = d.apply(.connect(me, app: app, userId: "walker", deviceId: "d", anonymous: nil), now: now)
        return measure(seconds, opsPerCall: 2) {
            let a = d.apply(.join(me, roomId: "room", EnterProfile(), .join), now: now)
            let b = d.apply(.leave(me, roomId: "room"), now: now)
            sink &+= a.effects.count &+ b.effects.count
        }
    }

    func run() {
        results.append(("enter+leave, room of 10", enterLeave(members: 10)))
        results.append(("enter+leave, room of 100,000", enterLeave(members: quick ? 10_000 : 100_000)))

        do {
            let d = makeDomain()
            var c = RoomConfig(roomId: "room")
            c.keepAlive = true
            _ = d.apply(.createRoom(app: app, c), now: now)
            let users = ["u1"]
            results.append(("mute+unmute (no notify)", measure(seconds, opsPerCall: 2) {
                let a = d.apply(.mute(app: app, roomId: "room", users, .minutes(10), .server, rc: nil, nim: nil), now: now)
                let b = d.apply(.unmute(app: app, roomId: "room", users, .all, .server, rc: nil, nim: nil), now: now)
                sink &+= a.mutations.count &+ b.mutations.count
            }))
            results.append(("mute+unmute (needNotify)", measure(seconds, opsPerCall: 2) {
                let a = d.apply(.mute(app: app, roomId: "room", users, .minutes(10), .server, rc: RCNotify(extra: ""), nim: nil), now: now)
                let b = d.apply(.unmute(app: app, roomId: "room", users, .all, .server, rc: RCNotify(extra: ""), nim: nil), now: now)
                sink &+= a.effects.count &+ b.effects.count
            }))
        }

        // One sender, a message every simulated millisecond. With the default settings the
        // sender's own limit (PX-1, 20 a second) refuses 49 sends in 50, so the first row is
        // mostly that refusal; the second lifts the sender's limit and the room's budget (QS-2)
        // so that every send is accepted, stored in the room's history and fanned out.
        for (name, lifted) in [("send (client message)", false), ("send, every one accepted", true)] {
            let d = makeDomain { s in
                if lifted {
                    s.sendsPerUserPerSecond = 1_000_000
                    s.roomMessagesPerSecond = 100_000
                }
            }
            var c = RoomConfig(roomId: "room")
            c.keepAlive = true
            _ = d.apply(.createRoom(app: app, c), now: now)
            let me = SessionID(1)
            _ = d.apply(.connect(me, app: app, userId: "talker", deviceId: "d", anonymous: nil), now: now)
            _ = d.apply(.join(me, roomId: "room", EnterProfile(), .join), now: now)
            for i in 0..<100 {
                let s = SessionID(UInt64(i + 10))
                _ = d.apply(.connect(s, app: app, userId: "m\(i)", deviceId: "d", anonymous: nil), now: now)
                _ = d.apply(.join(s, roomId: "room", EnterProfile(), .join), now: now)
            }
            var accepted = 0, sent = 0
            results.append((name, measure(seconds, opsPerCall: 1) {
                now += 1
                let a = d.apply(.sendMessage(app: app, roomId: "room", .session(me), .text, content: "hello world"), now: now)
                sent += 1
                if !a.effects.isEmpty { accepted += 1 }
                sink &+= a.effects.count
            }))
            shares.append((name, Double(accepted) / Double(max(sent, 1))))
        }

        // MO-2: screening a 1 KiB text against 10 and 10,000 sensitive words (the cost must not
        // grow with the list: one pass over the message).
        let message = sensitiveMessage()
        let few = SensitiveWordMatcher(sensitiveWords(10))
        let many = SensitiveWordMatcher(sensitiveWords(10_000))
        results.append(("screen 1 KiB, 10 words", measure(seconds, opsPerCall: 1) {
            if case .replaced(let t) = few.check(message) { sink &+= t.utf8.count }
        }))
        results.append(("screen 1 KiB, 10,000 words", measure(seconds, opsPerCall: 1) {
            if case .replaced(let t) = many.check(message) { sink &+= t.utf8.count }
        }))

        print("chat-bench: one thread, \(seconds) s per case\(quick ? " (quick)" : "")")
        for (name, rate) in results {
            print("  " + pad(name, 34) + leftPad(fmt(rate), 12) + " commands/s " + leftPad(fmt(1e9 / rate), 6) + " ns/command")
        }
        for (name, share) in shares { print("  \(name): \(Double(Int(share * 1000)) / 10)% of the sends accepted") }
        let small = results[0].1, large = results[1].1
        print("  enter/leave cost ratio, 100k-member room vs 10-member room: \(Double(Int(small / large * 100)) / 100)x (1.00 = no growth)")
        if let tenWords = results.first(where: { $0.0 == "screen 1 KiB, 10 words" })?.1,
           let tenThousand = results.first(where: { $0.0 == "screen 1 KiB, 10,000 words" })?.1 {
            print("  sensitive-word screening cost ratio, 10,000 words vs 10 words: \(Double(Int(tenWords / tenThousand * 100)) / 100)x (1.00 = no growth)")
        }
        if sink == 42 { print("") }
    }
}

func pad(_ s: String, _ n: Int) -> String { s + String(repeating: " ", count: max(0, n - s.count)) }
func leftPad(_ s: String, _ n: Int) -> String { String(repeating: " ", count: max(0, n - s.count)) + s }

if let i = CommandLine.arguments.firstIndex(of: "--replay") {
    let rest = CommandLine.arguments[(i + 1)...]
    do {
        try Replay.run(entries: rest.first.flatMap { Int($0) } ?? 3000, seed: rest.dropFirst().first.flatMap { UInt64($0) } ?? 42)
    } catch {
        print("chat-bench: \(error)")
        exit(1)
    }
} else {
    Benchmark().run()
}

/// Runs `body` (which performs `opsPerCall` commands) until `seconds` have passed; returns ops/s.
@inline(never)
func measure(_ seconds: Double, opsPerCall: Int, _ body: () -> Void) -> Double {
    for _ in 0..<1000 { body() } // warm-up
    var ops = 0
    let start = monotonicNanos()
    let budget = UInt64(seconds * 1e9)
    var elapsed: UInt64 = 0
    repeat {
        for _ in 0..<1000 { body() }
        ops += 1000 * opsPerCall
        elapsed = monotonicNanos() - start
    } while elapsed < budget
    return Double(ops) / (Double(elapsed) / 1e9)
}

func fmt(_ x: Double) -> String {
    var s = String(Int(x.rounded()))
    var i = s.count - 3
    while i > 0 {
        s.insert(",", at: s.index(s.startIndex, offsetBy: i))
        i -= 3
    }
    return s
}
