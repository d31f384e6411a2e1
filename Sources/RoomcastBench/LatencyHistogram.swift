/// Latencies in microseconds, log-linear buckets (exact below 128 µs, then 64 buckets per power of
/// two: under 1.6% error), mergeable across threads.
struct LatencyHistogram {
    private static let linear: UInt64 = 128
    private static let subBuckets: UInt64 = 64
    private(set) var counts = [UInt64](repeating: 0, count: 128 + 40 * 64)
    private(set) var total: UInt64 = 0
    private(set) var maximum: UInt64 = 0

    static func index(_ v: UInt64) -> Int {
        if v < linear { return Int(v) }
        let msb = 63 - v.leadingZeroBitCount
        let shift = msb - 6  // v >> shift is in [64, 128)
        return Int(linear) + (shift - 1) * Int(subBuckets) + Int((v >> UInt64(shift)) - subBuckets)
    }

    /// The smallest value that lands in bucket `i`.
    static func lowerBound(_ i: Int) -> UInt64 {
        if i < Int(linear) { return UInt64(i) }
        let j = i - Int(linear)
        let shift = j / Int(subBuckets) + 1
        return (UInt64(j % Int(subBuckets)) + subBuckets) << UInt64(shift)
    }

    mutating func record(microseconds v: UInt64) {
        let i = min(Self.index(v), counts.count - 1)
        counts[i] += 1
        total += 1
        if v > maximum { maximum = v }
    }

    mutating func merge(_ other: LatencyHistogram) {
        for i in 0..<counts.count { counts[i] += other.counts[i] }
        total += other.total
        maximum = max(maximum, other.maximum)
    }

    /// The value at quantile `q` (0...1), in microseconds.
    func quantile(_ q: Double) -> UInt64 {
        guard total > 0 else { return 0 }
        let rank = UInt64((Double(total) * q).rounded(.up))
        var seen: UInt64 = 0
        for (i, c) in counts.enumerated() where c > 0 {
            seen += c
            if seen >= max(rank, 1) { return min(Self.lowerBound(i), maximum) }
        }
        return maximum
    }
}
