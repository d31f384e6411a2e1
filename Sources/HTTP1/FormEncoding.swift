// Percent-decoding and application/x-www-form-urlencoded parsing (WHATWG URL §5.1), pure.

/// Decodes `%XX` escapes (and `+` as space when asked); nil if an escape is malformed or the
/// result is not UTF-8.
public func percentDecode<S: StringProtocol>(_ s: S, plusAsSpace: Bool) -> String? {
    var out: [UInt8] = []
    out.reserveCapacity(s.utf8.count)
    var it = Array(s.utf8)[...]
    while let b = it.popFirst() {
        if b == 0x25 { // %
            guard it.count >= 2, let hi = hexDigit(it.popFirst()!), let lo = hexDigit(it.popFirst()!) else { return nil }
            out.append(hi << 4 | lo)
        } else if b == 0x2B && plusAsSpace {
            out.append(0x20)
        } else {
            out.append(b)
        }
    }
    return String(validating: out, as: UTF8.self)
}

private func hexDigit(_ b: UInt8) -> UInt8? {
    switch b {
    case 0x30...0x39: return b - 0x30
    case 0x41...0x46: return b - 0x41 + 10
    case 0x61...0x66: return b - 0x61 + 10
    default: return nil
    }
}

/// Parses `a=1&b=x%20y` (application/x-www-form-urlencoded). Malformed escapes keep the raw text.
public func parseFormEncoded<S: StringProtocol>(_ s: S) -> [(name: String, value: String)] {
    var out: [(name: String, value: String)] = []
    for pair in s.split(separator: "&", omittingEmptySubsequences: true) {
        let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        let name = percentDecode(kv[0], plusAsSpace: true) ?? String(kv[0])
        let value = kv.count > 1 ? (percentDecode(kv[1], plusAsSpace: true) ?? String(kv[1])) : ""
        out.append((name: name, value: value))
    }
    return out
}
