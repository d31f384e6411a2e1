import Testing
import Reactor
@testable import Server

/// QS-3: when a WebSocket's peer counts as still taking output while its pong is late.
@Suite struct OutputProgressTests {
    let t0 = Instant(nanoseconds: 1_000_000_000)
    func at(_ s: Double) -> Instant { Instant(nanoseconds: t0.nanoseconds + UInt64(s * 1e9)) }
    let patience = Duration.seconds(60)

    @Test("QS-3: a write or falling unacknowledged bytes is taking output")
    func visibleProgress() {
        var p = OutputProgress()
        #expect(p.tick(now: at(1), unsent: nil, patience: patience) == nil)
        p.wrote(at: at(2))
        #expect(p.tick(now: at(3), unsent: nil, patience: patience) == at(2))
        // Nothing left in the kernel: the last write is what counts.
        #expect(p.tick(now: at(4), unsent: 0, patience: patience) == at(2))
        #expect(p.tick(now: at(5), unsent: 0, patience: patience) == at(2))
    }

    @Test("QS-3: bytes the kernel still holds for a reader whose window opens rarely keep it, up to the patience")
    func heldBytesKeepASlowReader() {
        var p = OutputProgress()
        p.wrote(at: at(0))
        // The window is closed: the unacknowledged bytes do not move for 40 s, yet it counts as reading.
        for s in stride(from: 1.0, through: 40.0, by: 1.0) {
            #expect(p.tick(now: at(s), unsent: 200_000, patience: patience) == at(s))
        }
        // The window opened: the bytes fell, the peer visibly took output.
        #expect(p.tick(now: at(41), unsent: 150_000, patience: patience) == at(41))
        #expect(p.lastTaken == at(41))
        // A peer that stopped reading: past the patience since it last took any, the held bytes
        // no longer count, and the pong timeout runs from then.
        #expect(p.tick(now: at(100), unsent: 150_000, patience: patience) == at(100))
        #expect(p.tick(now: at(101.5), unsent: 150_000, patience: patience) == at(41))
        #expect(p.tick(now: at(130), unsent: 150_000, patience: patience) == at(41))
    }

    @Test("QS-3: a tick without a pong awaited forgets the kernel's count")
    func forgetsBetweenPongs() {
        var p = OutputProgress()
        p.wrote(at: at(0))
        _ = p.tick(now: at(1), unsent: 100, patience: patience)
        _ = p.tick(now: at(2), unsent: nil, patience: patience)
        // 50 < 100, but the count of another ping's wait says nothing about this one.
        #expect(p.tick(now: at(3), unsent: 50, patience: patience) == at(3))
        #expect(p.lastTaken == at(0))
    }
}
