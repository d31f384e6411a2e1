import Testing
@testable import HTTP1

/// The byte classes are bit masks written as hex literals; these tests hold them to the grammar's
/// own character lists, for every one of the 256 byte values.
@Suite("Byte classes")
struct ByteClassTests {
    private static let alphaDigit = Array("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)

    @Test func tokenCharactersAreRFC9110Tchar() {
        let tchar = Set(Self.alphaDigit + Array("!#$%&'*+-.^_`|~".utf8))
        for b in 0...255 {
            #expect(isTokenChar(UInt8(b)) == tchar.contains(UInt8(b)), "byte \(b)")
        }
    }

    @Test func regNameCharactersAreRFC3986UnreservedAndSubDelims() {
        let regName = Set(Self.alphaDigit + Array("-._~!$&'()*+,;=".utf8))
        for b in 0...255 {
            #expect(isRegNameChar(UInt8(b)) == regName.contains(UInt8(b)), "byte \(b)")
        }
    }
}

/// `scanVisible` reads eight bytes at a time; these tests put every byte value at every position
/// of a run longer than one word and require the byte-at-a-time answer.
@Suite("Visible-byte scan")
struct ScanVisibleTests {
    private static func expected(_ bytes: [UInt8], obsText: Bool) -> Int {
        bytes.firstIndex { !($0 > 0x20 && $0 != 0x7F && (obsText || $0 < 0x80)) } ?? bytes.count
    }

    @Test(arguments: [false, true])
    func everyByteAtEveryPosition(obsText: Bool) {
        for position in 0..<19 {
            for value in 0...255 {
                var bytes = [UInt8](repeating: 0x61, count: 19)
                bytes[position] = UInt8(value)
                let got = bytes.withUnsafeBytes { scanVisible($0, from: 0, to: $0.count, obsText: obsText) }
                #expect(got == Self.expected(bytes, obsText: obsText), "byte \(value) at \(position)")
            }
        }
    }

    /// Starting mid-buffer and stopping short of its end: the scan never looks outside `i..<n`.
    @Test func boundsAreTheRangeGiven() {
        let bytes = [UInt8](repeating: 0x61, count: 40) + [0x00]
        bytes.withUnsafeBytes { b in
            for from in 0..<20 {
                for to in from..<40 {
                    #expect(scanVisible(b, from: from, to: to, obsText: true) == to)
                }
            }
            #expect(scanVisible(b, from: 3, to: 41, obsText: false) == 40)
        }
    }
}
