/// Lowercase hexadecimal of some bytes (digests in signatures and tokens).
public func hexEncoded<S: Sequence>(_ bytes: S) -> String where S.Element == UInt8 {
    let digits: StaticString = "0123456789abcdef"
    var out: [UInt8] = []
    out.reserveCapacity(bytes.underestimatedCount * 2)
    digits.withUTF8Buffer { d in
        for b in bytes {
            out.append(d[Int(b >> 4)])
            out.append(d[Int(b & 0xF)])
        }
    }
    return String(decoding: out, as: UTF8.self)
}

/// Where a header section ends in `bytes` (the index of its CRLF CRLF), if it has arrived.
public func headerSectionEnd(_ bytes: [UInt8]) -> Int? {
    guard bytes.count >= 4 else { return nil }
    for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
        return i
    }
    return nil
}
