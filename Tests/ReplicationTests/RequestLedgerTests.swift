import Foundation
import Testing
import TestKit
@testable import Chat
@testable import Replication

/// Cluster mode (CLUSTER.md "Nonces and idempotency keys"): the ledger every node keeps of signed
/// calls' nonces (SPEC §2) and idempotency keys (PX-2) judges the same entries alike, by log time
/// and position only.
@Suite("Request ledger (nonces and idempotency keys in a cluster)")
struct RequestLedgerTests {
    static let window: Int64 = 600_000
    static let t0: Int64 = 1_800_000_000_000

    static func ledger(maxNonces: Int = 1_000, maxKeys: Int = 1_000) -> RequestLedger {
        RequestLedger(nonceMilliseconds: window, maxNoncesPerApp: maxNonces, keyMilliseconds: 86_400_000, maxKeysPerApp: maxKeys)
    }

    static func call(_ nonce: String, app: String = "app", key: String? = nil, fingerprint: String = "f1", run: UInt64 = 1,
                     serial: UInt64 = 1) -> SignedCall {
        SignedCall(.command(.destroyRooms(app: app, ["r"])), nonce: RequestNonce(app: app, nonce: nonce),
                   key: key.map { IdempotencyClaim(app: app, key: $0, fingerprint: fingerprint, claim: ClaimID(incarnation: run, serial: serial)) })
    }

    static func answer(_ key: String, fingerprint: String = "f1", run: UInt64 = 1, serial: UInt64 = 1) -> KeptAnswer {
        KeptAnswer(ref: KeyRef(app: "app", key: key, claim: ClaimID(incarnation: run, serial: serial)), fingerprint: fingerprint, status: 201,
                   contentType: "application/json", body: Array("{}".utf8))
    }

    // SPEC §2 on a cluster: a nonce is accepted once inside twice the window of log time, per app.
    @Test func aNonceIsAcceptedOncePerAppInsideTheWindow() {
        var l = Self.ledger()
        do { let v = l.admit(Self.call("n1"), position: 1, at: Self.t0); #expect(v == .admitted) }
        do { let v = l.admit(Self.call("n1"), position: 2, at: Self.t0 + 1); #expect(v == .nonceReused) }
        // A nonce learned from a read's record counts the same.
        let learned = l.useNonce(RequestNonce(app: "app", nonce: "n2"), at: Self.t0 + 2)
        #expect(learned)
        do { let v = l.admit(Self.call("n2"), position: 4, at: Self.t0 + 3); #expect(v == .nonceReused) }
        let again = l.useNonce(RequestNonce(app: "app", nonce: "n1"), at: Self.t0 + 4)
        #expect(!again)
        // Another app's nonces are its own.
        do { let v = l.admit(Self.call("n1", app: "other"), position: 5, at: Self.t0 + 5); #expect(v == .admitted) }
        // Past the window (log time), the nonce is forgotten.
        do { let v = l.admit(Self.call("n1"), position: 6, at: Self.t0 + Self.window); #expect(v == .nonceReused) }
        do { let v = l.admit(Self.call("n1"), position: 7, at: Self.t0 + Self.window + 1); #expect(v == .admitted) }
        #expect(l.nonceCount(app: "app") == 2)
    }

    // The bound: past it the oldest nonces are forgotten first.
    @Test func nonceCountIsBoundedPerApp() {
        var l = Self.ledger(maxNonces: 3)
        for i in 0..<5 { do { let v = l.admit(Self.call("n\(i)"), position: Int64(i + 1), at: Self.t0 + Int64(i)); #expect(v == .admitted) } }
        #expect(l.nonceCount(app: "app") == 3)
        do { let v = l.admit(Self.call("n4"), position: 10, at: Self.t0 + 10); #expect(v == .nonceReused) }
        do { let v = l.admit(Self.call("n0"), position: 11, at: Self.t0 + 11); #expect(v == .admitted) }
    }

    // PX-2 on a cluster: a key's first claim makes the change; a retry is not applied again and
    // is told why: in progress, answered (replay), another request (42200), or lost (40903).
    @Test func aClaimedKeyIsNotAppliedTwice() {
        var l = Self.ledger()
        do { let v = l.admit(Self.call("a", key: "k"), position: 1, at: Self.t0); #expect(v == .admitted) }
        do { let v = l.admit(Self.call("b", key: "k", run: 2, serial: 9), position: 2, at: Self.t0 + 1); #expect(v == .duplicate(.inProgress)) }
        do { let v = l.admit(Self.call("c", key: "k", fingerprint: "f2", run: 2, serial: 10), position: 3, at: Self.t0 + 2); #expect(v == .duplicate(.otherRequest)) }
        // Another call's answer for the key is not the key's.
        do { let v = l.keepAnswer(Self.answer("k", run: 2, serial: 9), position: 4, at: Self.t0 + 3); #expect(!v) }
        do { let v = l.admit(Self.call("d", key: "k", run: 2, serial: 11), position: 5, at: Self.t0 + 4); #expect(v == .duplicate(.inProgress)) }
        do { let v = l.keepAnswer(Self.answer("k"), position: 6, at: Self.t0 + 5); #expect(v) }
        do { let v = l.admit(Self.call("e", key: "k", run: 3, serial: 1), position: 7, at: Self.t0 + 6); #expect(v == .duplicate(.answered)) }
        // A replayed nonce is refused before its key is looked at.
        do { let v = l.admit(Self.call("e", key: "k2"), position: 8, at: Self.t0 + 7); #expect(v == .nonceReused) }
        #expect(l.keyCount(app: "app") == 1)
    }

    /// A retry asks the ledger before it runs again (its first call's change may be applied on
    /// this node before the answer record): what it would be told, without claiming the key.
    @Test func peekingAtAKeyClaimsNothing() {
        var l = Self.ledger()
        #expect(l.peek(app: "app", key: "k", fingerprint: "f1", at: Self.t0) == nil)
        do { let v = l.admit(Self.call("a", key: "k"), position: 1, at: Self.t0); #expect(v == .admitted) }
        #expect(l.peek(app: "app", key: "k", fingerprint: "f1", at: Self.t0 + 1) == .inProgress)
        #expect(l.peek(app: "app", key: "k", fingerprint: "f2", at: Self.t0 + 1) == .otherRequest)
        #expect(l.peek(app: "other", key: "k", fingerprint: "f1", at: Self.t0 + 1) == nil)
        do { let v = l.keepAnswer(Self.answer("k"), position: 2, at: Self.t0 + 2); #expect(v) }
        #expect(l.peek(app: "app", key: "k", fingerprint: "f1", at: Self.t0 + 3) == .answered)
        // Past the key's time it is free again; peeking changed nothing.
        #expect(l.peek(app: "app", key: "k", fingerprint: "f1", at: Self.t0 + 3 + l.keyMilliseconds) == nil)
        #expect(l.keyCount(app: "app") == 1)
        // A claim whose run ended before it was answered is lost.
        do { let v = l.admit(Self.call("b", key: "k2", run: 7), position: 3, at: Self.t0 + 4); #expect(v == .admitted) }
        l.endRun(7)
        #expect(l.peek(app: "app", key: "k2", fingerprint: "f1", at: Self.t0 + 5) == .answerLost)
    }

    @Test func aReleasedKeyRunsAgainAndAnAbandonedOrEndedOneIsLost() {
        var l = Self.ledger()
        // Released (the answer said "try again"): a retry makes the change.
        do { let v = l.admit(Self.call("a", key: "released"), position: 1, at: Self.t0); #expect(v == .admitted) }
        l.release(KeyRef(app: "app", key: "released", claim: ClaimID(incarnation: 9, serial: 9))) // not the claim: ignored
        do { let v = l.admit(Self.call("b", key: "released", run: 2), position: 2, at: Self.t0); #expect(v == .duplicate(.inProgress)) }
        l.release(KeyRef(app: "app", key: "released", claim: ClaimID(incarnation: 1, serial: 1)))
        do { let v = l.admit(Self.call("c", key: "released", run: 2), position: 3, at: Self.t0); #expect(v == .admitted) }
        // Abandoned (the node could not tell whether its change was in the log; it was).
        do { let v = l.admit(Self.call("d", key: "abandoned", serial: 2), position: 4, at: Self.t0); #expect(v == .admitted) }
        l.abandon(KeyRef(app: "app", key: "abandoned", claim: ClaimID(incarnation: 1, serial: 2)))
        do { let v = l.admit(Self.call("e", key: "abandoned", run: 2, serial: 3), position: 5, at: Self.t0); #expect(v == .duplicate(.answerLost)) }
        // An abandon of a claim that never reached the log changes nothing.
        l.abandon(KeyRef(app: "app", key: "never", claim: ClaimID(incarnation: 1, serial: 7)))
        do { let v = l.admit(Self.call("f", key: "never", run: 2, serial: 4), position: 6, at: Self.t0); #expect(v == .admitted) }
        // The claiming node run ended before answering: lost; once it answered, replayed.
        do { let v = l.admit(Self.call("g", key: "ended", run: 5), position: 7, at: Self.t0); #expect(v == .admitted) }
        l.endRun(5)
        do { let v = l.admit(Self.call("h", key: "ended", run: 2, serial: 5), position: 8, at: Self.t0); #expect(v == .duplicate(.answerLost)) }
        do { let v = l.admit(Self.call("i", key: "released", run: 2, serial: 6), position: 9, at: Self.t0); #expect(v == .duplicate(.inProgress)) }
    }

    // A call that made no change (refused before it, a query) registers its key with its answer.
    @Test func anAnswerWithoutAChangeRegistersTheKey() {
        var l = Self.ledger()
        do { let v = l.keepAnswer(Self.answer("k", fingerprint: "f9"), position: 1, at: Self.t0); #expect(v) }
        do { let v = l.admit(Self.call("a", key: "k", fingerprint: "f9", run: 2), position: 2, at: Self.t0); #expect(v == .duplicate(.answered)) }
        do { let v = l.admit(Self.call("b", key: "k", fingerprint: "f1", run: 2), position: 3, at: Self.t0); #expect(v == .duplicate(.otherRequest)) }
    }

    // Keys are kept 24 h of log time and at most the bound per app; the answered ones forgotten
    // are reported, so their kept answers leave the replica too.
    @Test func keysExpireAndAreBoundedPerApp() {
        var l = Self.ledger(maxKeys: 2)
        for i in 0..<3 {
            do { let v = l.admit(Self.call("n\(i)", key: "k\(i)", serial: UInt64(i)), position: Int64(i + 1), at: Self.t0 + Int64(i)); #expect(v == .admitted) }
            do { let v = l.keepAnswer(Self.answer("k\(i)", serial: UInt64(i)), position: Int64(i + 10), at: Self.t0 + Int64(i)); #expect(v) }
        }
        #expect(l.keyCount(app: "app") == 2)
        let evicted = l.takeForgotten().map(\.key)
        #expect(evicted == ["k0"])
        do { let v = l.admit(Self.call("x", key: "k0", run: 2), position: 20, at: Self.t0 + 3); #expect(v == .admitted) }
        l.expire(at: Self.t0 + 86_400_000 + 5)
        #expect(l.keyCount(app: "app") == 0 && l.nonceCount(app: "app") == 0)
        let expired = Set(l.takeForgotten().map(\.key))
        #expect(expired == ["k1", "k2"])
    }

    // Determinism: two ledgers fed the same entries give the same verdicts.
    @Test func twoLedgersFedTheSameEntriesAgree() {
        var rng = SplitMix64(seed: 12)
        var entries: [LogRecord] = []
        for _ in 0..<3_000 {
            let nonce = "n\(rng.next() % 400)", key = "k\(rng.next() % 50)", fp = "f\(rng.next() % 2)"
            let ref = KeyRef(app: "app", key: key, claim: ClaimID(incarnation: rng.next() % 3, serial: rng.next() % 40))
            switch rng.next() % 6 {
            case 0, 1: entries.append(.signed(SignedCall(.command(.destroyRooms(app: "app", [])), nonce: RequestNonce(app: "app", nonce: nonce),
                                                        key: rng.next() % 2 == 0 ? nil : IdempotencyClaim(app: "app", key: key, fingerprint: fp, claim: ref.claim))))
            case 2: entries.append(.nonce(RequestNonce(app: "app", nonce: nonce)))
            case 3: entries.append(.answer(KeptAnswer(ref: ref, fingerprint: fp, status: 200, contentType: "application/json", body: [])))
            case 4: entries.append(rng.next() % 2 == 0 ? .releaseKey(ref) : .abandonKey(ref))
            default: entries.append(rng.next() % 10 == 0 ? .endSessions(incarnation: ref.claim.incarnation) : .tick)
            }
        }
        // `cut`: the ledger is replaced there by one made from its image (a snapshot), through JSON.
        func run(cut: Int? = nil) -> [String] {
            var l = Self.ledger(maxNonces: 300, maxKeys: 40)
            var out: [String] = []
            for (i, e) in entries.enumerated() {
                if i == cut {
                    let image = try! JSONDecoder().decode(RequestLedger.Image.self, from: try! JSONEncoder().encode(l.image))
                    #expect(image == l.image)
                    l = RequestLedger(image: image, nonceMilliseconds: l.nonceMilliseconds, maxNoncesPerApp: l.maxNoncesPerApp,
                                      keyMilliseconds: l.keyMilliseconds, maxKeysPerApp: l.maxKeysPerApp)
                }
                let at = Self.t0 + Int64(i) * 1_000, position = Int64(i + 1)
                switch e {
                case .signed(let c): out.append("\(l.admit(c, position: position, at: at))")
                case .nonce(let n): out.append("\(l.useNonce(n, at: at))")
                case .answer(let a): out.append("\(l.keepAnswer(a, position: position, at: at))")
                case .releaseKey(let r): l.release(r)
                case .abandonKey(let r): l.abandon(r)
                case .endSessions(let i): l.endRun(i)
                default: l.expire(at: at)
                }
                out.append(l.takeForgotten().map(\.key).joined(separator: ","))
            }
            return out
        }
        let first = run()
        #expect(first == run())
        // Snapshots: a ledger made from an image at any point judges the rest alike.
        for cut in [1, 500, 1_234, 2_999] { #expect(run(cut: cut) == first, "cut at \(cut)") }
        // The mix exercised every verdict.
        for v in ["admitted", "nonceReused", "inProgress", "answered", "otherRequest", "answerLost"] {
            #expect(first.contains { $0.contains(v) }, "no \(v)")
        }
    }

    // CL-9: a snapshot's nonces are one line each in one string per app (the JSON encoder's
    // memory grew with the number of objects); nonces with backslashes, line feeds and carriage
    // returns come back as they were, a snapshot of layout 1 (objects) still loads, and a
    // malformed line is an error.
    @Test func theNoncesImageIsCompactAndReadsBothLayouts() throws {
        var l = Self.ledger()
        let odd = ["plain", "a\\b", "line\nfeed", "ends in cr\r", "\r\n", "back\\n", "sp ace", "ünï",
                   // A backslash or line feed with a combining mark after it is one Character.
                   "\\\u{301}x", "a\n\u{301}", " leading"]
        for (i, nonce) in odd.enumerated() { #expect(l.admit(Self.call(nonce), position: Int64(i + 1), at: Self.t0 + Int64(i)) == .admitted) }
        let json = try JSONEncoder().encode(l.image)
        let object = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        let apps = try #require(object["nonces"] as? [[String: Any]])
        #expect(apps.count == 1 && apps[0]["list"] is String && apps[0]["order"] == nil && apps[0]["seen"] == nil)
        let image = try JSONDecoder().decode(RequestLedger.Image.self, from: json)
        #expect(image == l.image)
        #expect(image.nonceList.map(\.nonce) == odd)
        var restored = RequestLedger(image: image, nonceMilliseconds: Self.window, maxNoncesPerApp: 1_000, keyMilliseconds: 86_400_000,
                                     maxKeysPerApp: 1_000)
        for (i, nonce) in odd.enumerated() {
            #expect(restored.admit(Self.call(nonce), position: 100, at: Self.t0 + 100) == .nonceReused, "\(nonce.debugDescription)")
            #expect(restored.nonceCount(app: "app") == odd.count, "\(i)")
        }
        // Layout 1: `seen` and `order` as arrays of objects.
        let old = Data(#"{"nonces":[{"app":"app","seen":[{"nonce":"x","at":5},{"nonce":"y","at":6}],"order":[{"nonce":"x","at":5},{"nonce":"y","at":6}]}],"keys":[],"endedRuns":[]}"#.utf8)
        let fromOld = try JSONDecoder().decode(RequestLedger.Image.self, from: old)
        #expect(fromOld.nonceList.map { "\($0.app) \($0.nonce) \($0.at)" } == ["app x 5", "app y 6"])
        // A line without its time is refused, not read as something else.
        for bad in [#"{"nonces":[{"app":"app","list":"nonce-without-time"}],"keys":[],"endedRuns":[]}"#,
                    #"{"nonces":[{"app":"app","list":"5 x\n\n6 y"}],"keys":[],"endedRuns":[]}"#] {
            #expect(throws: DecodingError.self) { try JSONDecoder().decode(RequestLedger.Image.self, from: Data(bad.utf8)) }
        }
    }

    // The new records survive the log's codec.
    @Test func theRecordsRoundTrip() throws {
        let claim = ClaimID(incarnation: 3, serial: 77)
        let records: [LogRecord] = [
            .signed(Self.call("n", key: "k")),
            .signed(SignedCall(.disconnectUser(UserDisconnect(app: "app", userId: "u", device: nil, closeCode: 4010, reason: "bye")), nonce: nil, key: nil)),
            .signed(SignedCall(.disconnectUser(UserDisconnect(app: "app", userId: "u", device: "web", closeCode: 4011, reason: "")),
                               nonce: RequestNonce(app: "app", nonce: "x"), key: nil)),
            .nonce(RequestNonce(app: "app", nonce: "\u{1F600}")),
            .answer(KeptAnswer(ref: KeyRef(app: "app", key: "k", claim: claim), fingerprint: "f", status: 201, contentType: "application/json",
                               body: [0, 1, 255])),
            .releaseKey(KeyRef(app: "app", key: "k", claim: claim)), .abandonKey(KeyRef(app: "app", key: "k", claim: claim)),
        ]
        for r in records {
            let bytes = try JSONEncoder().encode(r)
            #expect(try JSONDecoder().decode(LogRecord.self, from: bytes) == r)
        }
    }
}
