/// MO-2: an app's sensitive words (RongCloud's `/sensitiveword/*`): a word either blocks the
/// message it appears in or is replaced in it.
public struct SensitiveWord: Equatable, Sendable, Codable {
    public var word: String
    /// nil: the word blocks its message (RongCloud's blocking word, type 1); otherwise it is
    /// replaced by this (type 0).
    public var replacement: String?

    public init(word: String, replacement: String? = nil) {
        self.word = word
        self.replacement = replacement
    }

    public var blocks: Bool { replacement == nil }

    /// What makes two words the same word (ASCII letters match either case).
    public var key: String { String(String.UnicodeScalarView(word.unicodeScalars.map { Unicode.Scalar(UInt32(SensitiveWordMatcher.fold($0)))! })) }

    /// RongCloud's bounds: a word, and its replacement, of 1 to `Limits.maxSensitiveWordChars`
    /// characters; a word holds no whitespace or control characters (RongCloud allows letters,
    /// digits and CJK characters; punctuation is allowed here too).
    public static func validate(word: String, field: String = "word") throws(ChatError) {
        guard !word.isEmpty, word.count <= Limits.maxSensitiveWordChars else {
            throw .invalid(field, "a sensitive word is 1 to \(Limits.maxSensitiveWordChars) characters")
        }
        for s in word.unicodeScalars where s.properties.isWhitespace || s.properties.generalCategory == .control || s == "," {
            throw .invalid(field, "a sensitive word holds no whitespace, control characters or commas")
        }
    }

    public static func validate(replacement: String, field: String = "replacement") throws(ChatError) {
        guard !replacement.isEmpty, replacement.count <= Limits.maxSensitiveWordChars else {
            throw .invalid(field, "a replacement is 1 to \(Limits.maxSensitiveWordChars) characters")
        }
    }
}

extension ChatDomain {
    /// MO-2: adds words (a word already listed takes its new replacement, or becomes blocking) and
    /// removes words (unknown ones are ignored, as RongCloud does); all or nothing.
    func editSensitiveWords(_ appKey: String, add: [SensitiveWord], remove: [String], _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        guard !add.isEmpty || !remove.isEmpty else { throw .invalid("words", "give at least one word") }
        guard add.count <= Limits.maxSensitiveWordsPerCall, remove.count <= Limits.maxSensitiveWordsPerCall else {
            throw .invalid("words", "at most \(Limits.maxSensitiveWordsPerCall) words per call")
        }
        for w in add {
            try SensitiveWord.validate(word: w.word)
            if let r = w.replacement { try SensitiveWord.validate(replacement: r) }
        }
        for w in remove { try SensitiveWord.validate(word: w, field: "words") }
        var list = app.settings.sensitiveWords
        if !remove.isEmpty {
            let gone = Set(remove.map { SensitiveWord(word: $0).key })
            list.removeAll { gone.contains($0.key) }
        }
        if !add.isEmpty {
            var index: [String: Int] = [:]
            for (i, w) in list.enumerated() { index[w.key] = i }
            for w in add {
                if let i = index[w.key] {
                    list[i] = w
                } else {
                    index[w.key] = list.count
                    list.append(w)
                }
            }
        }
        guard list.count <= Limits.maxSensitiveWordsPerApp else {
            throw .invalid("word", "an app has at most \(Limits.maxSensitiveWordsPerApp) sensitive words (\(app.settings.sensitiveWords.count) now)")
        }
        // MO-8: one entry for the words added and one for those removed, changed or not.
        if !add.isEmpty { audit(app, .sensitiveWordAdd, by: .server, roomId: "", targets: add.map(\.word), now: now, &out) }
        if !remove.isEmpty { audit(app, .sensitiveWordRemove, by: .server, roomId: "", targets: remove, now: now, &out) }
        guard list != app.settings.sensitiveWords else { return .done }
        var settings = app.settings
        settings.sensitiveWords = list
        app.settings = settings
        out.mutations.append(.putApp(appKey, settings))
        return .done
    }

    /// MO-2: what a message's text becomes under the app's words: unchanged, replaced, or refused
    /// (21501, RongCloud's "blocked by a sensitive word": nobody receives it).
    func screen(_ app: AppState, _ content: String) throws(ChatError) -> String {
        guard !app.wordMatcher.isEmpty else { return content }
        switch app.wordMatcher.check(content) {
        case .clean: return content
        case .blocked: throw ChatError(.sensitiveWordBlocked, "the message holds a blocked sensitive word; nobody received it", field: "content")
        case .replaced(let text):
            try Validate.maxBytes(text, app.settings.maxMessageBytes, field: "content")
            return text
        }
    }
}

/// MO-2: finds an app's sensitive words in a message in one pass over its Unicode scalars,
/// whatever the number of words (Aho–Corasick: a trie of the words with failure links, so each
/// scalar of the message costs amortised O(1) transitions, plus one step per word found — at most
/// `Limits.maxSensitiveWordChars` words end at one position). ASCII letters match either case.
///
/// Built once per change of the word list and shared read-only by every check.
public struct SensitiveWordMatcher: Sendable {
    /// Goto function: (state << 21 | scalar) → next state. Unicode scalars fit in 21 bits.
    private var edges: [UInt64: Int32] = [:]
    /// Failure link of each state: the longest proper suffix of its path that is a state.
    private var fail: [Int32] = [0]
    /// The index into `words` of the word that ends exactly at this state (-1: none).
    private var wordAt: [Int32] = [-1]
    /// The nearest state along the failure links where a word ends (0: none).
    private var dictLink: [Int32] = [0]
    /// The root's transitions for scalars below U+10000 (0: stay at the root), so most steps
    /// from the root are one array read instead of a hash lookup.
    private var rootNext: [Int32] = []
    /// Each word's length in scalars and in UTF-8 bytes.
    private var wordScalars: [Int] = []
    private var wordBytes: [Int] = []
    public private(set) var words: [SensitiveWord] = []

    public init(_ words: [SensitiveWord] = []) {
        self.words = words
        for (i, w) in words.enumerated() { insert(w.word, index: Int32(i)) }
        link()
        wordScalars = words.map { $0.word.unicodeScalars.count }
        wordBytes = words.map { $0.word.utf8.count }
        if !words.isEmpty {
            rootNext = Array(repeating: 0, count: 0x1_0000)
            for (key, next) in edges where key >> 21 == 0 && key < 0x1_0000 { rootNext[Int(key)] = next }
        }
    }

    public var isEmpty: Bool { words.isEmpty }

    static func fold(_ s: Unicode.Scalar) -> UInt64 {
        let v = s.value
        return UInt64(v >= 65 && v <= 90 ? v + 32 : v)
    }

    private mutating func insert(_ word: String, index: Int32) {
        var state: Int32 = 0
        for s in word.unicodeScalars {
            let key = UInt64(state) << 21 | Self.fold(s)
            if let next = edges[key] {
                state = next
            } else {
                let next = Int32(fail.count)
                fail.append(0)
                wordAt.append(-1)
                dictLink.append(0)
                edges[key] = next
                state = next
            }
        }
        wordAt[Int(state)] = index
    }

    /// Breadth first, so a state's failure target (shallower) is linked before it.
    private mutating func link() {
        var children: [[(scalar: UInt64, state: Int32)]] = Array(repeating: [], count: fail.count)
        for (key, next) in edges { children[Int(key >> 21)].append((key & 0x1F_FFFF, next)) }
        var queue: [Int32] = []
        for (_, child) in children[0] { queue.append(child) }
        var head = 0
        while head < queue.count {
            let state = queue[head]
            head += 1
            for (scalar, child) in children[Int(state)] {
                var f = fail[Int(state)]
                while f != 0 && edges[UInt64(f) << 21 | scalar] == nil { f = fail[Int(f)] }
                let target = edges[UInt64(f) << 21 | scalar] ?? 0
                fail[Int(child)] = target
                dictLink[Int(child)] = wordAt[Int(target)] >= 0 ? target : dictLink[Int(target)]
                queue.append(child)
            }
        }
    }

    /// One occurrence: where it starts and ends (in scalars and in UTF-8 bytes, ends exclusive)
    /// and which word.
    public struct Hit: Equatable, Sendable {
        public var start: Int
        public var end: Int
        public var word: Int
        public var byteStart: Int
        public var byteEnd: Int
    }

    /// Every occurrence of every word, in the order their ends come (one pass).
    public func hits(in text: String) -> [Hit] {
        guard !words.isEmpty else { return [] }
        var out: [Hit] = []
        var state: Int32 = 0
        var i = 0
        var bytes = 0
        for s in text.unicodeScalars {
            let c = Self.fold(s)
            let v = s.value
            bytes += v < 0x80 ? 1 : v < 0x800 ? 2 : v < 0x1_0000 ? 3 : 4
            i += 1
            if state == 0, c < UInt64(rootNext.count) {
                // The root's transitions for the Basic Multilingual Plane: one array read.
                state = rootNext[Int(c)]
            } else {
                while true {
                    if let n = edges[UInt64(state) << 21 | c] {
                        state = n
                        break
                    }
                    if state == 0 { break }
                    state = fail[Int(state)]
                    if state == 0, c < UInt64(rootNext.count) {
                        state = rootNext[Int(c)]
                        break
                    }
                }
            }
            var found = wordAt[Int(state)] >= 0 ? state : dictLink[Int(state)]
            while found != 0 {
                let w = Int(wordAt[Int(found)])
                out.append(Hit(start: i - wordScalars[w], end: i, word: w, byteStart: bytes - wordBytes[w], byteEnd: bytes))
                found = dictLink[Int(found)]
            }
        }
        return out
    }

    /// What a message becomes: blocked (by the first blocking word found), or its text with the
    /// replaced words' occurrences replaced (leftmost first, the longest at each start;
    /// occurrences overlapping a replaced one are left).
    public enum Verdict: Equatable, Sendable {
        case clean
        case blocked(word: String)
        case replaced(String)
    }

    public func check(_ text: String) -> Verdict {
        let found = hits(in: text)
        guard !found.isEmpty else { return .clean }
        if let b = found.first(where: { words[$0.word].blocks }) { return .blocked(word: words[b.word].word) }
        var kept: [Hit] = []
        for h in found.sorted(by: { $0.start != $1.start ? $0.start < $1.start : $0.end > $1.end }) {
            if let last = kept.last, h.start < last.end { continue }
            kept.append(h)
        }
        // Copied as UTF-8 slices between the replaced occurrences.
        var result: [UInt8] = []
        let utf8 = Array(text.utf8)
        result.reserveCapacity(utf8.count)
        var from = 0
        for h in kept {
            result.append(contentsOf: utf8[from..<h.byteStart])
            result.append(contentsOf: (words[h.word].replacement ?? "").utf8)
            from = h.byteEnd
        }
        result.append(contentsOf: utf8[from...])
        return .replaced(String(decoding: result, as: UTF8.self))
    }
}
