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
