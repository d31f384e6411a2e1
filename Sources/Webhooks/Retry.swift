import Foundation

/// The published retry schedule (WH-4) and what each attempt's result means.
public struct RetrySchedule: Equatable, Sendable {
    /// Delay before retry n (n = 1 is the second attempt), in milliseconds.
    public var delays: [Int64]
    /// Each delay is multiplied by a factor drawn uniformly from 1 − jitter … 1 + jitter.
    public var jitter: Double

    /// Immediately, then 5 s, 30 s, 2 min, 10 min, 30 min, 2 h, 6 h, 12 h: nine attempts over about 21 hours.
    public static let standard = RetrySchedule(delays: [5_000, 30_000, 120_000, 600_000, 1_800_000, 7_200_000, 21_600_000, 43_200_000],
                                               jitter: 0.2)

    public init(delays: [Int64], jitter: Double) {
        self.delays = delays
        self.jitter = min(max(jitter, 0), 1)
    }

    public var maxAttempts: Int { delays.count + 1 }

    /// When to try again after `attempts` failed attempts, or nil when they are exhausted.
    /// `random` is uniform in 0 ..< 1 (injected, so tests need no sleeping and no luck).
    public func nextAttempt(afterFailed attempts: Int, now: Int64, random: Double) -> Int64? {
        guard attempts >= 1 && attempts <= delays.count else { return nil }
        let base = Double(delays[attempts - 1])
        let factor = 1 - jitter + 2 * jitter * min(max(random, 0), 1)
        return now + max(0, Int64((base * factor).rounded()))
    }

    /// Parses `"5s,30s,2m,1h,250ms"`.
    public static func parse(_ text: String, jitter: Double = 0.2) -> RetrySchedule? {
        var delays: [Int64] = []
        for part in text.split(separator: ",") {
            let p = part.trimmingCharacters(in: .whitespaces)
            let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000)]
            guard let (suffix, scale) = units.first(where: { p.hasSuffix($0.0) }),
                  let n = Int64(p.dropLast(suffix.count)), n >= 0, n <= 7 * 24 * 3_600_000 / scale else { return nil }
            delays.append(n * scale)
        }
        return delays.isEmpty ? nil : RetrySchedule(delays: delays, jitter: jitter)
    }
}

/// What one attempt's result means (WH-4): 2xx delivered; 410 Gone disables the endpoint;
/// everything else (other statuses, timeouts, refused connections) is retried.
public enum AttemptVerdict: Equatable, Sendable {
    case delivered
    case gone
    case retry

    public static func of(status: Int) -> AttemptVerdict {
        if (200..<300).contains(status) { return .delivered }
        if status == 410 { return .gone }
        return .retry
    }
}
