import Testing
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

    /// Seeded mutations of valid and edge requests: replaced, inserted and deleted bytes from the
    /// classes the grammar turns on (separators, line ends, controls, obs-text), and truncations.
    @Test func mutationsAgree() {
        var rng = SplitMix64(seed: 0x5EED_0F_4EAD)
        let seeds = ValidRequestTests.valid.map { bytes($0.1) } + Self.edges.prefix(4).map(bytes)
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
            let whole = parse(request)
            let dripped = parse(request, chunk: 1)
            if whole != dripped && disagreements.count < 5 {
                disagreements.append("round \(round): \(String(decoding: request, as: UTF8.self).debugDescription)")
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements)")
    }
}

/// A seeded generator (SplitMix64): the same cases on every run.
struct SplitMix64 {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
