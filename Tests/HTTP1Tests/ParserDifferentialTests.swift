import Testing
import TestKit
@testable import HTTP1

/// The parser reads a head in one of two ways: whole, in one pass, when every byte of it is in the
/// buffer and it has the common form; byte by byte otherwise. A request fed a byte at a time always
/// takes the second way, fed whole it takes the first if it can. These tests hold the two to the
/// same outcome (heads, bodies, error) over requests at the edges of the first way's rules and
/// over thousands of mutations of them.
@Suite("HTTP/1.1 request parser: whole-head and byte-wise paths agree")
struct ParserDifferentialTests {
    static let get = "GET / HTTP/1.1\r\nHost: a\r\n"

    /// Requests at the edges of what the one-pass reading accepts, valid ones.
    static let edges: [String] = [
        "GET / HTTP/1.1\r\nHost: a\r\nX-S: \t a b \t\r\n\r\n",
        "GET / HTTP/1.1\r\nHOST: a\r\nContent-TYPE: x\r\nX-Mixed-Case: V\r\n\r\n",
        "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "GET /a?b HTTP/1.1\r\nHost: a\r\n\r\nGET /c HTTP/1.1\r\nHost: a\r\n\r\nPOST /d HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx",
        get + (1...99).map { "X-\($0): v\r\n" }.joined() + "\r\n", // 100 fields: the limit
        "GET /" + String(repeating: "a", count: 8192 - 14) + " HTTP/1.1\r\nHost: a\r\n\r\n", // request line of 8,192 bytes
        get + "X-Big: " + String(repeating: "b", count: 32 * 1024 - 9 - 9 - 2) + "\r\n\r\n", // header section of 32 KiB
        "GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-Spaces:   \r\n\r\n",
        "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
    ]

    @Test("edges: parsed alike whole and drip-fed", arguments: edges)
    func edgesAgree(_ request: String) {
        let whole = parse(bytes(request))
        #expect(whole.error == nil, "\(whole.error.map(String.init(describing:)) ?? "")")
        #expect(whole.ends >= 1)
        #expect(parse(bytes(request), chunk: 1) == whole)
    }

    /// Just past each limit, both ways refuse with the same status.
    @Test func pastTheLimitsBothRefuse() {
        let cases: [(String, Int)] = [
            (Self.get + (1...100).map { "X-\($0): v\r\n" }.joined() + "\r\n", 431),
            ("GET /" + String(repeating: "a", count: 8193 - 14) + " HTTP/1.1\r\nHost: a\r\n\r\n", 414),
            (Self.get + "X-Big: " + String(repeating: "b", count: 32 * 1024 - 9 - 9 - 1) + "\r\n\r\n", 431),
        ]
        for (request, status) in cases {
            let whole = parse(bytes(request))
            #expect(whole.error?.status.code == status)
            #expect(parse(bytes(request), chunk: 1).error == whole.error)
        }
    }

    /// Every edge case is read by the one-pass path (a regression that sent them all byte by byte
    /// would pass the agreement tests), and forms it leaves to the byte-wise path are left alone.
    @Test func theOnePassPathTakesTheEdgesAndLeavesTheRest() {
        for request in Self.edges {
            var parser = HTTPRequestParser()
            let end = bytes(request).withUnsafeBytes { parser.wholeHead($0, from: 0) }
            #expect(end != nil, "\(request.prefix(60).debugDescription)")
            // And `next` takes it there: the head comes out of the first call, the whole of it consumed.
            var fresh = HTTPRequestParser()
            let (progress, consumed) = bytes(request).withUnsafeBytes { fresh.next($0) }
            #expect(progress == .head && consumed == end, "\(request.prefix(60).debugDescription)")
        }
        let others = [
            "GET / HTTP/1.1\r\nHost: a\r\n",                    // cut short
            "GET / HTTP/1.1\r\nHost: a\r\n Folded\r\n\r\n",   // obsolete line folding
            "GET / HTTP/1.1\nHost: a\r\n\r\n",                 // bare LF
            "GET / HTTP/1.2\r\nHost: a\r\n\r\n",               // another version
            "GET / HTTP/1.1\r\nHost : a\r\n\r\n",              // space before the colon
            "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",           // leading empty line
        ]
        for request in others {
            var parser = HTTPRequestParser()
            let end = bytes(request).withUnsafeBytes { parser.wholeHead($0, from: 0) }
            #expect(end == nil, "\(request.debugDescription)")
        }
    }

    /// Every split of a request into two pieces: the first piece may end anywhere, including after
    /// fields the one-pass reading had already noted before it gave up; nothing of them may stay.
    @Test func everyTwoPieceSplitAgrees() {
        for request in (ValidRequestTests.valid.map(\.1) + Self.edges).filter({ $0.utf8.count < 2048 }) {
            let whole = parse(bytes(request))
            let b = bytes(request)
            for k in 1..<b.count {
                var parser = HTTPRequestParser()
                var out = ParseOutcome()
                var body: [UInt8] = []
                for piece in [Array(b[..<k]), Array(b[k...]), []] {
                    var used = 0
                    pieces: while true {
                        let (step, consumed) = piece.withUnsafeBytes { parser.parse(UnsafeRawBufferPointer(rebasing: $0[used...])) }
                        let base = used
                        used += consumed
                        switch step {
                        case .needMoreData: break pieces
                        case .error(let e): out.error = e; break pieces
                        case .event(.head(let h)): out.heads.append(h); body = []
                        case .event(.body(let r)): body.append(contentsOf: piece[(base + r.lowerBound)..<(base + r.upperBound)])
                        case .event(.end): out.bodies.append(body); out.ends += 1
                        }
                    }
                    if out.error != nil { break }
                }
                #expect(out == whole, "split at \(k): \(request.prefix(40).debugDescription)")
            }
        }
    }

    /// Limits near `Int.max` (no limit, in effect) must not overflow the one-pass reading's window.
    @Test func limitsNearIntMax() {
        var limits = HTTPLimits()
        limits.maxRequestLineBytes = .max
        limits.maxHeaderBytes = .max
        let out = parse(bytes("GET /x HTTP/1.1\r\nHost: a\r\n\r\n"), limits: limits)
        #expect(out.error == nil && out.ends == 1)
    }

    /// The mutations again under small limits, so that every limit is met often, on both paths.
    @Test func mutationsAgreeUnderSmallLimits() {
        var limits = HTTPLimits()
        limits.maxRequestLineBytes = 24
        limits.maxHeaderBytes = 40
        limits.maxHeaderCount = 2
        limits.maxBodyBytes = 8
        let disagreements = mutationDisagreements(seed: 0x11_0017, limits: limits)
        #expect(disagreements.isEmpty, "\(disagreements)")
    }

    /// The case the small-limit mutations first found: a version run that meets the line's limit
    /// and the version's eight bytes, read whole (one run) or in pieces (runs that start with part
    /// of the version buffered). The line's limit is met first: 414 every way.
    @Test func versionRunMeetsBothLimits() {
        var limits = HTTPLimits()
        limits.maxRequestLineBytes = 24
        let request = bytes("GET /abcdefghijklmn \u{01}TTP/1.11\r\n\r\n")
        for chunk in [nil, 1, 2, 3, 4, 5, 6, 7, 8, 9] {
            #expect(parse(request, chunk: chunk, limits: limits).error == .uriTooLong, "chunk \(String(describing: chunk))")
        }
    }

    /// Limits of zero or below are raised to their floors: nothing traps, consumption never goes
    /// backwards, and both paths agree.
    @Test func limitsAtOrBelowZero() {
        for value in [0, -1, Int.min] {
            var limits = HTTPLimits()
            limits.maxRequestLineBytes = value
            limits.maxHeaderBytes = value
            limits.maxHeaderCount = value
            limits.maxBodyBytes = value
            limits.maxChunkExtensionBytes = value
            limits.maxLeadingEmptyLines = value
            for request in ValidRequestTests.valid.map({ bytes($0.1) }) {
                let whole = parse(request, limits: limits)
                #expect(whole.error != nil)
                #expect(parse(request, chunk: 1, limits: limits) == whole)
            }
        }
    }

    /// Seeded mutations of valid and edge requests: replaced, inserted and deleted bytes from the
    /// classes the grammar turns on (separators, line ends, controls, obs-text), and truncations.
    @Test func mutationsAgree() {
        let disagreements = mutationDisagreements(seed: 0x5EED_0F_4EAD, limits: HTTPLimits())
        #expect(disagreements.isEmpty, "\(disagreements)")
    }

    private func mutationDisagreements(seed: UInt64, limits: HTTPLimits) -> [String] {
        var rng = SplitMix64(seed: seed)
        let seeds = ValidRequestTests.valid.map { bytes($0.1) } + Self.edges.prefix(5).map(bytes)
        let interesting: [UInt8] = [0x20, 0x09, 0x0D, 0x0A, 0x3A, 0x00, 0x7F, 0x80, 0xFF, 0x41, 0x2F, 0x3F, 0x2C, 0x30, 0x5B, 0x25]
        var disagreements: [String] = []
        for round in 0..<4000 {
            var request = seeds[Int(rng.next() % UInt64(seeds.count))]
            for _ in 0..<(1 + Int(rng.next() % 3)) {
                guard !request.isEmpty else { break }
                let at = Int(rng.next() % UInt64(request.count))
                let byte = interesting[Int(rng.next() % UInt64(interesting.count))]
                switch rng.next() % 4 {
                case 0: request[at] = byte
                case 1: request.insert(byte, at: at)
                case 2: request.remove(at: at)
                default: request = Array(request[..<at])
                }
            }
            let whole = parse(request, limits: limits)
            let dripped = parse(request, chunk: 1, limits: limits)
            // And in pieces of 2 to 9 bytes, so that runs start with part of a token buffered.
            let pieces = parse(request, chunk: 2 + Int(rng.next() % 8), limits: limits)
            if (whole != dripped || whole != pieces) && disagreements.count < 5 {
                disagreements.append("round \(round): \(String(decoding: request, as: UTF8.self).debugDescription)")
            }
        }
        return disagreements
    }
}
