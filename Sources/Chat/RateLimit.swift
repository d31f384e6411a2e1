/// A token bucket (PX-1): `rate` tokens a second, holding at most `burst`; time is the caller's
/// (milliseconds), so it is tested without sleeping. Pure value; 32 bytes.
public struct TokenBucket: Equatable, Sendable {
    public let rate: Double
    public let burst: Double
    private var tokens: Double
    private var last: Int64

    /// The bucket as a snapshot holds it.
    var image: BucketImage { BucketImage(rate: rate, burst: burst, tokens: tokens, last: last) }

    init(image: BucketImage) {
        rate = image.rate
        burst = image.burst
        tokens = image.tokens
        last = image.last
    }

    public init(rate: Int, burst: Int? = nil, now: Int64) {
        self.rate = Double(max(1, rate))
        self.burst = Double(max(1, burst ?? rate))
        self.tokens = self.burst
        self.last = now
    }

    /// Takes one token: true if there was one.
    public mutating func take(now: Int64) -> Bool {
        refill(now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// Takes one token if `floor` tokens are left after it (QS-2: a class may not use the share
    /// below its floor): true if it did.
    public mutating func take(now: Int64, keeping floor: Double) -> Bool {
        refill(now)
        guard tokens - 1 >= floor else { return false }
        tokens -= 1
        return true
    }

    /// Whether a token could be taken at `now` (none is).
    public mutating func hasToken(now: Int64) -> Bool {
        refill(now)
        return tokens >= 1
    }

    /// Whether the bucket is full at `now` (an idle caller: its bucket can be forgotten).
    public mutating func isFull(now: Int64) -> Bool {
        refill(now)
        return tokens >= burst
    }

    private mutating func refill(_ now: Int64) {
        if now > last {
            tokens = min(burst, tokens + Double(now - last) * rate / 1000)
            last = now
        }
    }
}
