import Reactor

/// QS-3: when a connection's peer was last seen taking output, as its pong timeout and its send
/// timeout count it. A slow reader's pong waits behind everything it has not read yet, so a late
/// pong alone does not say the peer is gone; and a slow reader's socket turns writable again only
/// once a third of its send buffer has drained, so a write that waits alone does not say it either.
/// Pure: the connection feeds it what it writes and what the kernel holds.
///
/// The peer took output when the kernel accepted more of the connection's queue, or when the
/// kernel's unacknowledged bytes fell between two ticks. A reader slow enough that TCP's receive
/// window opens only every few tens of seconds shows neither for that long: while the kernel still
/// holds bytes for it, it is taken as reading for up to `patience` (the send timeout) after it last
/// visibly took any. A peer that stopped reading altogether is closed once that has passed.
///
/// Every open connection keeps one: 16 bytes, its two optional values held with a sentinel
/// (`UInt64.max` nanoseconds, an instant no monotonic clock reaches; `Int.min` bytes).
public struct OutputProgress: Sendable {
    private var taken = UInt64.max
    private var unsentAtLastTick = Int.min

    /// When the peer last visibly took output.
    public var lastTaken: Instant? { taken == .max ? nil : Instant(nanoseconds: taken) }
    /// The kernel's unacknowledged bytes at the last tick while a pong was awaited or output waited.
    private var lastUnsent: Int? {
        get { unsentAtLastTick == .min ? nil : unsentAtLastTick }
        set { unsentAtLastTick = newValue ?? .min }
    }

    public init() {}

    /// The kernel accepted some of the queue.
    public mutating func wrote(at now: Instant) { taken = min(now.nanoseconds, .max - 1) }

    /// A tick: the kernel's unacknowledged bytes while a pong is awaited or output waits (nil
    /// otherwise, or when they cannot be read). Returns when the pong timeout should count from.
    public mutating func tick(now: Instant, unsent: Int?, patience: Duration) -> Instant? {
        guard let unsent else {
            lastUnsent = nil
            return lastTaken
        }
        if let last = lastUnsent, unsent < last { wrote(at: now) }
        lastUnsent = unsent
        if unsent > 0, let taken = lastTaken, now - taken < patience { return now }
        return lastTaken
    }
}
