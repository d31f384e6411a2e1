import Synchronization

/// Durations counted in fixed buckets, the Prometheus histogram's way: one atomic per bucket, so
/// any thread records and `/metrics` reads without a lock. Used for the HTTP requests' durations
/// and the fan-out's delay (QS-7).
public final class LatencyBuckets: Sendable {
    /// Bucket upper bounds in microseconds (rendered as `le` in seconds); one more bucket holds
    /// what is past the last.
    public static let bounds: [Int64] = [1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 75_000, 100_000, 150_000, 200_000, 300_000,
                                         500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000]

    private final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    private let counts = (0...LatencyBuckets.bounds.count).map { _ in Counter() }
    private let sum = Atomic<Int64>(0)

    public init() {}

    /// What was recorded: observations per bucket (not cumulative), their count and sum.
    public struct Snapshot: Sendable, Equatable {
        public var buckets = [Int](repeating: 0, count: LatencyBuckets.bounds.count + 1)
        public var sumMicroseconds: Int64 = 0
        public var count: Int { buckets.reduce(0, +) }

        public init() {}

        /// Two recorders' observations together (one per loop, say).
        public static func + (a: Snapshot, b: Snapshot) -> Snapshot {
            var s = a
            for i in s.buckets.indices { s.buckets[i] += b.buckets[i] }
            s.sumMicroseconds &+= b.sumMicroseconds
            return s
        }

        /// Prometheus text: the cumulative buckets, the sum and the count of `name`, with `label`
        /// (`class="high"`, say) in every series when given.
        public func render(_ name: String, label: String? = nil) -> String {
            let labels = label.map { "\($0)," } ?? ""
            let plain = label.map { "{\($0)}" } ?? ""
            var text = ""
            var cumulative = 0
            for (i, bound) in LatencyBuckets.bounds.enumerated() {
                cumulative += buckets[i]
                text += "\(name)_bucket{\(labels)le=\"\(LatencyBuckets.seconds(bound))\"} \(cumulative)\n"
            }
            text += "\(name)_bucket{\(labels)le=\"+Inf\"} \(count)\n"
            text += "\(name)_sum\(plain) \(LatencyBuckets.seconds(sumMicroseconds))\n"
            text += "\(name)_count\(plain) \(count)\n"
            return text
        }
    }

    /// The bucket of a duration: the first bound it does not exceed.
    public static func bucket(microseconds: Int64) -> Int {
        var low = 0, high = bounds.count
        while low < high {
            let mid = (low + high) / 2
            if microseconds <= bounds[mid] { high = mid } else { low = mid + 1 }
        }
        return low
    }

    /// Records `count` observations of this duration.
    public func record(nanoseconds: UInt64, count n: Int = 1) {
        let micros = Int64(min(nanoseconds / 1_000, UInt64(Int64.max / 1_000_000)))
        counts[Self.bucket(microseconds: micros)].value.add(n, ordering: .relaxed)
        sum.add(micros &* Int64(n), ordering: .relaxed)
    }

    public var snapshot: Snapshot {
        var s = Snapshot()
        for (i, c) in counts.enumerated() { s.buckets[i] = c.value.load(ordering: .relaxed) }
        s.sumMicroseconds = sum.load(ordering: .relaxed)
        return s
    }

    /// Microseconds as seconds in decimal, exactly ("0.0025", "10").
    public static func seconds(_ micros: Int64) -> String {
        let whole = micros / 1_000_000, fraction = micros % 1_000_000
        guard fraction != 0 else { return "\(whole)" }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 6 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return "\(whole).\(digits)"
    }
}
