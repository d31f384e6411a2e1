import Testing
import TestKit
@testable import WebSocket

@Suite("UTF-8 validation")
struct UTF8ValidatorTests {
    static let valid: [[UInt8]] = [
        [], Array("hello".utf8), Array("κόσμε".utf8),
        [0x7F], [0xC2, 0x80], [0xDF, 0xBF], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xEE, 0x80, 0x80],
        [0xEF, 0xBF, 0xBD], [0xEF, 0xBF, 0xBF], [0xF0, 0x90, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF],
        Array("\u{10FFFF}\u{1F600}ascii tail".utf8),
    ]

    static let invalid: [[UInt8]] = [
        [0x80], [0xBF], [0xC0, 0x80], [0xC1, 0xBF],               // stray continuation, overlong 2-byte
        [0xE0, 0x80, 0xAF], [0xF0, 0x80, 0x80, 0xAF],             // overlong 3- and 4-byte
        [0xED, 0xA0, 0x80], [0xED, 0xBF, 0xBF],                   // UTF-16 surrogates
        [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80],       // above U+10FFFF
        [0xFE], [0xFF], [0xC2, 0x41], [0xE2, 0x82, 0x41],          // bad bytes, broken sequences
        Array("valid prefix".utf8) + [0xCE, 0xBA, 0xE1, 0xBD, 0xB9, 0xCF, 0x83, 0xCE, 0xBC, 0xCE, 0xB5, 0xED, 0xA0, 0x80],
    ]

    @Test("valid sequences, whole and byte by byte", arguments: valid)
    func acceptsValid(_ bytes: [UInt8]) {
        var whole = UTF8Validator()
        let wholeOK = whole.validate(bytes)
        #expect(wholeOK && whole.isComplete)
        var drip = UTF8Validator()
        for b in bytes {
            let ok = drip.validate([b])
            #expect(ok)
        }
        #expect(drip.isComplete)
    }

    @Test("invalid sequences", arguments: invalid)
    func rejectsInvalid(_ bytes: [UInt8]) {
        var v = UTF8Validator()
        let first = v.validate(bytes)
        #expect(!first)
        // Rejection is sticky.
        let after = v.validate(Array("ok".utf8))
        #expect(!after)
    }

    @Test func truncatedSequenceIsIncomplete() {
        var v = UTF8Validator()
        let prefixOK = v.validate([0xF0, 0x90, 0x80])
        #expect(prefixOK && !v.isComplete)
        let restOK = v.validate([0x80])
        #expect(restOK && v.isComplete)
    }

    @Test func agreesWithTheStandardLibraryOnRandomInput() {
        // Differential check against Swift's own decoder over biased random byte strings.
        var rng = SplitMix64(seed: 0x5EED)
        let alphabet: [UInt8] = [0x41, 0x7F, 0x80, 0xBF, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xA0, 0x9F, 0x90, 0x8F, 0xC0, 0xFF]
        for _ in 0..<20_000 {
            let n = Int(rng.next() % 12)
            let bytes = (0..<n).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }
            var v = UTF8Validator()
            let ours = v.validate(bytes) && v.isComplete
            let theirs = String(validating: bytes, as: UTF8.self) != nil
            #expect(ours == theirs, "\(bytes)")
        }
    }
}
