import Crypto
import Foundation
import Testing
import TestKit
import Wire

/// `base64URLDecode`: a pure decoder on the bytes (it replaced a detour through Foundation's
/// string replacing and `Data(base64Encoded:)`, which cost a client token's verification about
/// 50 µs on every connect). Checked against RFC 4648's vectors, against Foundation's decoder on
/// the same inputs, and with malformed inputs.
@Suite("base64url decoding (SPEC §2 client tokens, TR-1 cursors)")
struct Base64URLDecodeTests {
    /// What the old implementation answered: both alphabets, padding completed to a group of four.
    static func foundation(_ s: String) -> [UInt8]? {
        var t = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while t.count % 4 != 0 { t += "=" }
        return Data(base64Encoded: t).map { Array($0) }
    }

    @Test("RFC 4648 §10 vectors, unpadded, padded and partly padded")
    func vectors() {
        let vectors = ["": "", "f": "Zg", "fo": "Zm8", "foo": "Zm9v", "foob": "Zm9vYg", "fooba": "Zm9vYmE", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            #expect(base64URLDecode(encoded) == Array(plain.utf8), "\(encoded)")
            let padded = encoded + String(repeating: "=", count: (4 - encoded.count % 4) % 4)
            #expect(base64URLDecode(padded) == Array(plain.utf8), "\(padded)")
        }
        #expect(base64URLDecode("Zg=") == Array("f".utf8))
        // Both alphabets: 62 and 63 are `-` `_` in base64url and `+` `/` in base64.
        #expect(base64URLDecode("-_8") == [0xFB, 0xFF] && base64URLDecode("+/8") == [0xFB, 0xFF] && base64URLDecode("+/8=") == [0xFB, 0xFF])
    }

    @Test("Every byte string up to 64 bytes decodes back from its encoding, in either alphabet")
    func roundTrip() {
        var rng = SplitMix64(seed: 4648)
        for n in 0...64 {
            for _ in 0..<8 {
                let bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
                let url = base64URL(bytes)
                #expect(base64URLDecode(url) == bytes)
                #expect(base64URLDecode(Substring(url)) == bytes)
                #expect(base64URLDecode(Data(bytes).base64EncodedString()) == bytes)
            }
        }
    }

    @Test("Malformed: another character, padding inside or past the last group, a group of one character or of padding alone")
    func malformed() {
        for bad in ["Z", "Zm9vY", "Zg==Zg==", "Zm=9", "Zg===", "Zm9v=", "=", "==", "====", "Zm9v====", "Z===",
                    "Zm 9", " Zm9", "Zm9\n", "Zm9\t", "Zm.9", "Zm9v\0", "Zm9vé", "Zm9v\u{FF}", "%Zm9"] {
            #expect(base64URLDecode(bad) == nil, "\(bad.debugDescription)")
        }
    }

    @Test("Against Foundation's decoder on random inputs: the same bytes whenever this one accepts, the same answer without padding")
    func sameAsFoundation() {
        // Foundation's decoder is looser with padding: it skips an "=" inside ("VZ=5"), takes
        // padding past the last group ("r4Fs=") and decodes a group of padding alone to [0]. Those
        // are refused here (RFC 4648 §3.3: no character outside the alphabet). Everything this
        // decoder accepts, Foundation decodes to the same bytes.
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/=.= \n".unicodeScalars)
        var rng = SplitMix64(seed: 7515)
        var accepted = 0
        for _ in 0..<20_000 {
            let n = Int.random(in: 0...12, using: &rng)
            let s = String(String.UnicodeScalarView((0..<n).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &rng)] }))
            let ours = base64URLDecode(s)
            if let ours {
                #expect(ours == Self.foundation(s), "\(s.debugDescription)")
                accepted += 1
            }
            if !s.contains("=") { #expect(ours == Self.foundation(s), "\(s.debugDescription)") }
        }
        // Unpadded groups of base64 characters only, as tokens and cursors are.
        for _ in 0..<5_000 {
            let n = Int.random(in: 0...40, using: &rng)
            let s = String(String.UnicodeScalarView((0..<n).map { _ in alphabet[Int.random(in: 0..<64, using: &rng)] }))
            #expect(base64URLDecode(s) == Self.foundation(s), "\(s.debugDescription)")
            if base64URLDecode(s) != nil { accepted += 1 }
        }
        #expect(accepted > 3_000)
    }

    @Test("§2: a token with the usual header, another valid header, or an alg other than HS256")
    func tokenHeaders() {
        let claims = TokenClaims(sub: "u1", app: "app1", exp: 4_000_000_000)
        let secret = "secret-0123456789"
        let minted = ClientToken.mint(claims, secret: secret)
        #expect((try? ClientToken.verify(minted, secret: { _ in secret }).get())?.sub == "u1")
        func signed(header: String) -> String {
            let payload = minted.split(separator: ".")[1]
            let input = base64URL(Array(header.utf8)) + "." + payload
            let mac = Array(HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: SymmetricKey(data: Array(secret.utf8))))
            return input + "." + base64URL(mac)
        }
        // Another spelling of an HS256 header still parses; any other alg is refused.
        #expect((try? ClientToken.verify(signed(header: #"{ "typ": "JWT", "alg": "HS256" }"#), secret: { _ in secret }).get())?.sub == "u1")
        for header in [#"{"alg":"none","typ":"JWT"}"#, #"{"alg":"RS256","typ":"JWT"}"#, #"{"typ":"JWT"}"#, "not json"] {
            guard case .failure(let e) = ClientToken.verify(signed(header: header), secret: { _ in secret }) else {
                Issue.record("\(header) accepted")
                continue
            }
            #expect(e.code == .badToken && e.message == "token algorithm must be HS256" && e.field == "token", "\(header): \(e)")
        }
    }
}
