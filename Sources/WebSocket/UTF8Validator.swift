/// An incremental UTF-8 validator (Björn Höhrmann's DFA), so text can be checked piece by piece as
/// frames arrive and a bad byte fails the connection at once, even mid-frame (RFC 6455 §8.1).
public struct UTF8Validator: Sendable {
    private static let accept: UInt8 = 0
    private static let reject: UInt8 = 12

    private var state: UInt8 = 0

    public init() {}

    /// True if the bytes so far end on a character boundary.
    public var isComplete: Bool { state == Self.accept }

    public mutating func reset() { state = Self.accept }

    /// Feeds more bytes; false as soon as they cannot be UTF-8 (the state then stays rejected).
    public mutating func validate(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var s = state
        if s == Self.reject { return false }
        let n = bytes.count
        var i = 0
        guard let base = bytes.baseAddress else { return true }
        while i < n {
            // Skip ASCII eight bytes at a time while between characters.
            if s == Self.accept {
                while n - i >= 8 {
                    let w = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                    if w & 0x8080_8080_8080_8080 != 0 { break }
                    i += 8
                }
                if i == n { break }
            }
            let type = Self.table[Int(base.load(fromByteOffset: i, as: UInt8.self))]
            s = Self.table[256 + Int(s) + Int(type)]
            if s == Self.reject {
                state = s
                return false
            }
            i += 1
        }
        state = s
        return true
    }

    public mutating func validate<C: Collection<UInt8>>(_ bytes: C) -> Bool {
        if let done = bytes.withContiguousStorageIfAvailable({ validate(UnsafeRawBufferPointer($0)) }) { return done }
        let copy = Array(bytes)
        return copy.withUnsafeBytes { validate($0) }
    }

    // Character classes of every byte, then transitions (state + class → state).
    private static let table: [UInt8] = [
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9,
        7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
        8, 8, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
        10, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 3, 3, 11, 6, 6, 6, 5, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8,

        0, 12, 24, 36, 60, 96, 84, 12, 12, 12, 48, 72, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12,
        12, 0, 12, 12, 12, 12, 12, 0, 12, 0, 12, 12, 12, 24, 12, 12, 12, 12, 12, 24, 12, 24, 12, 12,
        12, 12, 12, 12, 12, 12, 12, 24, 12, 12, 12, 12, 12, 24, 12, 12, 12, 12, 12, 12, 12, 24, 12, 12,
        12, 12, 12, 12, 12, 12, 12, 36, 12, 36, 12, 12, 12, 36, 12, 12, 12, 12, 12, 36, 12, 36, 12, 12,
        12, 36, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12,
    ]
}
