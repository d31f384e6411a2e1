import Testing
@testable import Chat

/// QS-2 over time: a room takes `roomMessagesPerSecond`, of which `highPriorityReservePercent` only
/// high-priority messages may use. The reserve caps what the other classes get over time, not only
/// in one instant's burst.
@Suite struct RoomBudgetTests {
    /// Offers `perSecond` messages of each class in `classes` every second for `seconds`, evenly
    /// spread and interleaved; returns how many of each the room took.
    static func offer(_ h: Harness, _ classes: [(MessagePriority, transient: Bool)], perSecond: Int, seconds: Int) -> [String: Int] {
        var taken: [String: Int] = [:]
        let step = 1000 / Int64(perSecond)
        for _ in 0..<(perSecond * seconds) {
            h.now += step
            for (priority, transient) in classes {
                let name = transient ? "transient" : priority.rawValue
                let options = MessageOptions(priority: priority, transient: transient)
                if h.run(.sendMessage(app: h.app, roomId: "r", .server(userId: "srv", nickname: "", avatar: ""), .text, content: name,
                                      options: options)).succeeded {
                    taken[name, default: 0] += 1
                }
            }
        }
        return taken
    }

    static func harness(rate: Int, reserve: Int) -> Harness {
        let h = Harness {
            $0.roomMessagesPerSecond = rate
            $0.highPriorityReservePercent = reserve
        }
        #expect(h.createRoom("r").succeeded)
        return h
    }

    // QS-2: alone, normal and low messages get at most the rate less the reserve, sustained; high
    // ones get the whole rate.
    @Test(arguments: [(20, 90), (200, 50), (100, 0)])
    func eachClassAloneGetsItsShareOverTime(rate: Int, reserve: Int) {
        let share = max(1, rate * (100 - reserve) / 100)
        for (priority, transient) in [(MessagePriority.normal, false), (.low, false), (.high, true), (.high, false)] {
            let h = Self.harness(rate: rate, reserve: reserve)
            let taken = Self.offer(h, [(priority, transient)], perSecond: 500, seconds: 10).values.reduce(0, +)
            let expected = priority == .high && !transient ? rate : share
            // Ten seconds at the class's rate, plus at most one burst (a fifth of a second's worth).
            #expect(taken >= expected * 10 && taken <= expected * 10 + max(1, expected / 5) + 1,
                    "\(priority) transient \(transient) at \(rate)/s with \(reserve)% reserved: \(taken) in 10 s")
        }
    }

    // QS-2: all classes pushing at once: normal and low together stay within the shared rate
    // (normal first), and high priority gets at least the reserve.
    @Test func underContentionHighKeepsTheReserve() {
        let h = Self.harness(rate: 200, reserve: 50)
        let taken = Self.offer(h, [(.high, false), (.normal, false), (.low, false)], perSecond: 500, seconds: 10)
        let high = taken["high", default: 0], normal = taken["normal", default: 0], low = taken["low", default: 0]
        #expect(normal + low <= 100 * 10 + 20 + 1, "\(taken)")
        #expect(high >= 100 * 10, "\(taken)")
        #expect(high + normal + low <= 200 * 10 + 40 + 1, "\(taken)")
        #expect(normal > low, "\(taken)")
    }
}
