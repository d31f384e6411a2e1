import Testing
@testable import Chat

/// MO-2: the sensitive-word matcher against a naive reference, and the words in the domain: a
/// blocked message reaches nobody (21501), a replaced one is delivered replaced, server sends are
/// screened only when the app asks, and the list's bounds.
@Suite struct SensitiveWordTests {
    /// Every occurrence of every word, found the slow way (each word at each position).
    static func naive(_ words: [SensitiveWord], _ text: String) -> Set<[Int]> {
        let scalars = text.unicodeScalars.map { SensitiveWordMatcher.fold($0) }
        var out = Set<[Int]>()
        for (wi, w) in words.enumerated() {
            let pattern = w.word.unicodeScalars.map { SensitiveWordMatcher.fold($0) }
            guard pattern.count <= scalars.count else { continue }
            for start in 0...(scalars.count - pattern.count) where Array(scalars[start..<(start + pattern.count)]) == pattern {
                out.insert([start, start + pattern.count, wi])
            }
        }
        return out
    }

    @Test("MO-2: the matcher finds exactly the occurrences a naive scan finds (random words and texts over a small alphabet)")
    func matchesTheNaiveScan() {
        var rng = SplitMix(seed: 29)
        let alphabet: [Character] = ["a", "b", "A", "c", "词", "敏"]
        for _ in 0..<300 {
            var seen = Set<String>()
            var words: [SensitiveWord] = []
            for _ in 0..<Int(rng.next() % 12 + 1) {
                let w = String((0..<Int(rng.next() % 4 + 1)).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] })
                let key = SensitiveWord(word: w).key
                if seen.insert(key).inserted { words.append(SensitiveWord(word: w, replacement: rng.next() % 3 == 0 ? nil : "*")) }
            }
            let text = String((0..<Int(rng.next() % 40)).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] })
            let m = SensitiveWordMatcher(words)
            let found = Set(m.hits(in: text).map { [$0.start, $0.end, $0.word] })
            #expect(found == Self.naive(words, text), "words \(words.map(\.word)) text \(text)")
            let blocking = Self.naive(words, text).contains { words[$0[2]].blocks }
            switch m.check(text) {
            case .blocked: #expect(blocking)
            case .clean: #expect(Self.naive(words, text).isEmpty)
            case .replaced: #expect(!blocking && !Self.naive(words, text).isEmpty)
            }
        }
    }

    @Test("MO-2: replacement is leftmost-longest, case-insensitive for ASCII, and leaves other text alone")
    func replacement() {
        let m = SensitiveWordMatcher([SensitiveWord(word: "bad", replacement: "***"), SensitiveWord(word: "badword", replacement: "#"),
                                      SensitiveWord(word: "敏感", replacement: "xx")])
        #expect(m.check("a BADWORD and a Bad one, 敏感词") == .replaced("a # and a *** one, xx词"))
        #expect(m.check("nothing here") == .clean)
        let b = SensitiveWordMatcher([SensitiveWord(word: "ok", replacement: "fine"), SensitiveWord(word: "kill")])
        #expect(b.check("ok, skill") == .blocked(word: "kill"), "a blocking word inside a longer text blocks")
        // A blocking word that ends where a longer replaced word ends is still found.
        let c = SensitiveWordMatcher([SensitiveWord(word: "xab", replacement: "-"), SensitiveWord(word: "ab")])
        #expect(c.check("xab") == .blocked(word: "ab"))
    }

    func room() -> (Harness, alice: SessionID, bob: SessionID) {
        let h = Harness()
        h.createRoom("r")
        let alice = h.connect("alice"), bob = h.connect("bob")
        #expect(h.join(alice, "r").succeeded)
        #expect(h.join(bob, "r").succeeded)
        #expect(h.run(.editSensitiveWords(app: h.app, add: [SensitiveWord(word: "spam", replacement: "****"), SensitiveWord(word: "forbidden")],
                                          remove: [])).succeeded)
        h.clearInboxes()
        return (h, alice, bob)
    }

    @Test("MO-2: a client's message with a blocking word is refused with 21501 and reaches nobody; a replaced one reaches everyone replaced")
    func clientSends() {
        let (h, alice, bob) = room()
        let blocked = h.run(.sendMessage(app: h.app, roomId: "r", .session(alice), .text, content: "this is Forbidden"))
        #expect(blocked.error?.code == .sensitiveWordBlocked && blocked.error?.code.rawValue == 21501 && blocked.error?.field == "content")
        #expect(blocked.effects.isEmpty && blocked.mutations.isEmpty && blocked.webhooks.isEmpty)
        #expect(h.received(bob).isEmpty)
        let replaced = h.run(.sendMessage(app: h.app, roomId: "r", .session(alice), .text, content: "buy SPAM now"))
        guard case .success(.message(let m)) = replaced.reply else { Issue.record("not sent"); return }
        #expect(m.content == "buy **** now")
        #expect(h.received(bob).messages.map(\.content) == ["buy **** now"])
        #expect(replaced.webhooks.first?.details["content"] == "buy **** now")
        // Custom messages are not screened (RongCloud screens text messages only).
        #expect(h.run(.sendMessage(app: h.app, roomId: "r", .session(alice), .custom, content: "{\"t\":\"forbidden\"}")).succeeded)
    }

    @Test("MO-2: the app server's messages are screened only when sensitiveWordsOnServerSends is on")
    func serverSends() {
        let (h, _, bob) = room()
        let server = MessageSender.server(userId: "", nickname: "", avatar: "")
        #expect(h.run(.sendMessage(app: h.app, roomId: "r", server, .text, content: "forbidden spam")).succeeded)
        #expect(h.received(bob).messages.map(\.content) == ["forbidden spam"])
        var patch = AppSettingsPatch()
        patch.sensitiveWordsOnServerSends = true
        #expect(h.run(.updateAppSettings(app: h.app, patch)).succeeded)
        h.clearInboxes()
        #expect(h.run(.sendMessage(app: h.app, roomId: "r", server, .text, content: "forbidden")).error?.code == .sensitiveWordBlocked)
        #expect(h.run(.sendMessage(app: h.app, roomId: "r", server, .text, content: "spam")).succeeded)
        #expect(h.received(bob).messages.map(\.content) == ["****"])
    }

    @Test("MO-2: adding, re-adding and removing words; the list's bounds; bad words change nothing")
    func listEdits() {
        let (h, _, _) = room()
        func words() -> [SensitiveWord] {
            guard case .sensitiveWords(let list)? = h.query(.sensitiveWords(app: h.app)) else { return [] }
            return list
        }
        #expect(words().map(\.word) == ["spam", "forbidden"])
        // Re-adding a word (any ASCII case) changes its kind in place.
        #expect(h.run(.editSensitiveWords(app: h.app, add: [SensitiveWord(word: "SPAM")], remove: [])).succeeded)
        #expect(words() == [SensitiveWord(word: "SPAM"), SensitiveWord(word: "forbidden")])
        #expect(h.run(.editSensitiveWords(app: h.app, add: [], remove: ["Forbidden", "unknown"])).succeeded)
        #expect(words() == [SensitiveWord(word: "SPAM")])
        let bad: [([SensitiveWord], [String], String)] = [
            ([SensitiveWord(word: "")], [], "word"),
            ([SensitiveWord(word: String(repeating: "词", count: Limits.maxSensitiveWordChars + 1))], [], "word"),
            ([SensitiveWord(word: "two words")], [], "word"),
            ([SensitiveWord(word: "a,b")], [], "word"),
            ([SensitiveWord(word: "ok", replacement: "")], [], "replacement"),
            ([SensitiveWord(word: "ok", replacement: String(repeating: "r", count: Limits.maxSensitiveWordChars + 1))], [], "replacement"),
            ((0...Limits.maxSensitiveWordsPerCall).map { SensitiveWord(word: "w\($0)") }, [], "words"),
            ([], [], "words"),
            ([], ["bad word"], "words"),
        ]
        for (add, remove, field) in bad {
            let out = h.run(.editSensitiveWords(app: h.app, add: add, remove: remove))
            #expect(out.error?.code == .invalidParameter && out.error?.field == field, "\(field): \(String(describing: out.error))")
            #expect(out.mutations.isEmpty)
        }
        #expect(words() == [SensitiveWord(word: "SPAM")])
        #expect(h.run(.editSensitiveWords(app: h.app, add: [SensitiveWord(word: String(repeating: "词", count: Limits.maxSensitiveWordChars))], remove: [])).succeeded)
    }

    @Test("MO-2: an app holds at most maxSensitiveWordsPerApp words; the call that would pass it changes nothing")
    func appBound() {
        let h = Harness()
        var n = 0
        while n < Limits.maxSensitiveWordsPerApp {
            let batch = (n..<min(n + Limits.maxSensitiveWordsPerCall, Limits.maxSensitiveWordsPerApp)).map { SensitiveWord(word: "w\($0)") }
            #expect(h.run(.editSensitiveWords(app: h.app, add: batch, remove: [])).succeeded)
            n += batch.count
        }
        let over = h.run(.editSensitiveWords(app: h.app, add: [SensitiveWord(word: "one-more")], remove: []))
        #expect(over.error?.code == .invalidParameter && over.error?.field == "word")
        #expect(h.domain.appSettings(h.app)?.sensitiveWords.count == Limits.maxSensitiveWordsPerApp)
        // Replacing one in the same call fits.
        #expect(h.run(.editSensitiveWords(app: h.app, add: [SensitiveWord(word: "one-more")], remove: ["w0"])).succeeded)
    }
}

/// A small deterministic generator for the property test.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
