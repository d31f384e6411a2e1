/// Keys in insertion order with O(1) append, remove and membership, and paging from an anchor in
/// either direction. Member lists (join order), fixed members and the NIM queue use it so that
/// entering or leaving a room never costs more in a larger room.
struct OrderedIndex<Key: Hashable> {
    private var slots: [Key: Int32] = [:]
    private var list = SlotList<Key>()

    var count: Int { slots.count }
    var isEmpty: Bool { slots.isEmpty }

    func contains(_ key: Key) -> Bool { slots[key] != nil }

    /// Appends `key` at the end; false if it was already present (order unchanged).
    @discardableResult
    mutating func append(_ key: Key) -> Bool {
        // One hash for the common case (a new key): claim the slot, undo if the key was there.
        let slot = list.nextSlot
        if let existing = slots.updateValue(slot, forKey: key) {
            slots[key] = existing
            return false
        }
        list.append(key)
        return true
    }

    @discardableResult
    mutating func remove(_ key: Key) -> Bool {
        guard let slot = slots.removeValue(forKey: key) else { return false }
        list.remove(slot: slot)
        return true
    }

    var first: Key? { list.first }
    var last: Key? { list.last }

    /// Up to `limit` keys after `anchor` (exclusive; from the start when nil), oldest first,
    /// that pass `filter`.
    func forward(after anchor: Key? = nil, limit: Int, where filter: (Key) -> Bool = { _ in true }) -> [Key] {
        guard let anchor else { return list.forward(afterSlot: nil, limit: limit, where: filter) }
        guard let a = slots[anchor] else { return [] }
        return list.forward(afterSlot: a, limit: limit, where: filter)
    }

    /// Up to `limit` keys before `anchor` (exclusive; from the end when nil), newest first.
    func backward(before anchor: Key? = nil, limit: Int, where filter: (Key) -> Bool = { _ in true }) -> [Key] {
        guard let anchor else { return list.backward(beforeSlot: nil, limit: limit, where: filter) }
        guard let a = slots[anchor] else { return [] }
        return list.backward(beforeSlot: a, limit: limit, where: filter)
    }

    /// All keys, oldest first.
    var all: [Key] { list.all }
}

/// Keys in insertion order, each in a slot that stays its own until it is removed: a doubly
/// linked list in arrays, with no index of its own from key to slot. `OrderedIndex` keeps that
/// index in a dictionary; a room's present users keep their slot in their member records.
struct SlotList<Key> {
    private var keys: [Key?] = []
    private var prev: [Int32] = []
    private var next: [Int32] = []
    private var free: [Int32] = []
    private var head: Int32 = -1
    private var tail: Int32 = -1
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// The slot the next `append` takes.
    var nextSlot: Int32 { free.last ?? Int32(keys.count) }

    /// Appends `key` at the end; returns its slot.
    @discardableResult
    mutating func append(_ key: Key) -> Int32 {
        let slot: Int32
        if let reused = free.popLast() {
            slot = reused
            keys[Int(slot)] = key
        } else {
            slot = Int32(keys.count)
            keys.append(key)
            prev.append(-1)
            next.append(-1)
        }
        prev[Int(slot)] = tail
        next[Int(slot)] = -1
        if tail >= 0 { next[Int(tail)] = slot } else { head = slot }
        tail = slot
        count += 1
        return slot
    }

    /// Removes the key in `slot` (a slot `append` returned and not removed since).
    mutating func remove(slot: Int32) {
        precondition(slot >= 0 && Int(slot) < keys.count && keys[Int(slot)] != nil, "SlotList: no key in slot \(slot)")
        let p = prev[Int(slot)], n = next[Int(slot)]
        if p >= 0 { next[Int(p)] = n } else { head = n }
        if n >= 0 { prev[Int(n)] = p } else { tail = p }
        keys[Int(slot)] = nil
        count -= 1
        if count == 0 {
            // Release the storage of an emptied list.
            self = SlotList()
        } else {
            free.append(slot)
        }
    }

    var first: Key? { head >= 0 ? keys[Int(head)] : nil }
    var last: Key? { tail >= 0 ? keys[Int(tail)] : nil }

    /// Up to `limit` keys after the one in `anchor` (from the start when nil), oldest first, that
    /// pass `filter`.
    func forward(afterSlot anchor: Int32?, limit: Int, where filter: (Key) -> Bool = { _ in true }) -> [Key] {
        var out: [Key] = []
        var s = anchor.map { next[Int($0)] } ?? head
        while s >= 0 && out.count < limit {
            let k = keys[Int(s)]!
            if filter(k) { out.append(k) }
            s = next[Int(s)]
        }
        return out
    }

    /// Up to `limit` keys before the one in `anchor` (from the end when nil), newest first.
    func backward(beforeSlot anchor: Int32?, limit: Int, where filter: (Key) -> Bool = { _ in true }) -> [Key] {
        var out: [Key] = []
        var s = anchor.map { prev[Int($0)] } ?? tail
        while s >= 0 && out.count < limit {
            let k = keys[Int(s)]!
            if filter(k) { out.append(k) }
            s = prev[Int(s)]
        }
        return out
    }

    /// All keys, oldest first.
    var all: [Key] { forward(afterSlot: nil, limit: Int.max) }
}

extension Dictionary {
    /// Mutates the value for `key` in place (inserting `defaultValue` first if missing) with a
    /// single hash look-up.
    @inline(__always)
    mutating func modify<R>(_ key: Key, default defaultValue: @autoclosure () -> Value, _ body: (inout Value) -> R) -> R {
        body(&self[key, default: defaultValue()])
    }
}

/// A min-heap of (deadline, key) with lazy deletion: callers push whenever a deadline is set and
/// re-check the real state when an entry comes due, so moving or cancelling a deadline costs
/// nothing. `tick(now:)` stays proportional to what expires.
public struct DeadlineQueue<Key: Hashable> {
    private struct Entry {
        var deadline: Int64
        var key: Key
    }
    private var heap: [Entry] = []

    public init() {}

    public var count: Int { heap.count }

    public mutating func push(_ deadline: Int64, _ key: Key) {
        heap.append(Entry(deadline: deadline, key: key))
        var c = heap.count - 1
        while c > 0 {
            let p = (c - 1) / 2
            guard heap[c].deadline < heap[p].deadline else { break }
            heap.swapAt(c, p)
            c = p
        }
    }

    /// Removes and returns every key whose deadline is <= now.
    public mutating func popDue(_ now: Int64) -> [Key] {
        var out: [Key] = []
        while let top = heap.first, top.deadline <= now {
            out.append(top.key)
            heap.swapAt(0, heap.count - 1)
            heap.removeLast()
            var p = 0
            while true {
                let l = 2 * p + 1, r = l + 1
                var m = p
                if l < heap.count && heap[l].deadline < heap[m].deadline { m = l }
                if r < heap.count && heap[r].deadline < heap[m].deadline { m = r }
                if m == p { break }
                heap.swapAt(p, m)
                p = m
            }
        }
        return out
    }

    public var nextDeadline: Int64? { heap.first?.deadline }

    /// The heap as it is laid out (equal deadlines come due in an order that depends on it).
    var entries: [(deadline: Int64, key: Key)] { heap.map { ($0.deadline, $0.key) } }

    /// A queue with exactly this layout (`entries` of another).
    init(entries: [(Int64, Key)]) {
        heap = entries.map { Entry(deadline: $0.0, key: $0.1) }
    }
}

/// A bounded ring: appends overwrite the oldest element once full.
struct Ring<Element> {
    private var storage: [Element] = []
    private var start = 0
    let capacity: Int

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// A ring holding `elements` (at most `capacity`, the newest kept), oldest first.
    init(capacity: Int, elements: [Element]) {
        self.capacity = max(1, capacity)
        storage = Array(elements.suffix(self.capacity))
    }

    var count: Int { storage.count }
    var isEmpty: Bool { storage.isEmpty }

    /// Appends; when full, the oldest element makes room and is returned.
    @discardableResult
    mutating func append(_ e: Element) -> Element? {
        if storage.count < capacity {
            storage.append(e)
            return nil
        }
        let evicted = storage[start]
        storage[start] = e
        start = (start + 1) % capacity
        return evicted
    }

    subscript(i: Int) -> Element {
        get { storage[(start + i) % storage.count] }
        set { storage[(start + i) % storage.count] = newValue }
    }

    /// Drops elements from the oldest end while `shouldDrop` holds.
    mutating func dropOldest(while shouldDrop: (Element) -> Bool) {
        guard !storage.isEmpty, shouldDrop(self[0]) else { return }
        var n = 0
        while n < storage.count && shouldDrop(self[n]) { n += 1 }
        guard n > 0 else { return }
        let kept = (n..<storage.count).map { self[$0] }
        storage = kept
        start = 0
    }

    /// Drops the `k` oldest elements.
    mutating func dropOldest(_ k: Int) {
        guard k > 0 else { return }
        storage = (min(k, storage.count)..<storage.count).map { self[$0] }
        start = 0
    }

    var elements: [Element] { (0..<storage.count).map { self[$0] } }
}

/// The newest messages of a room, kept in memory for history queries; older ones are only in the
/// store (SPEC §13: at most `Limits.historyMemoryMessagesPerRoom` messages and
/// `Limits.historyMemoryBytesPerRoom` bytes of content per room, whatever the app's settings).
struct RecentHistory {
    private var ring: Ring<ChatMessage>
    private(set) var bytes = 0
    /// Some message still within retention was dropped to keep the bound: memory alone cannot
    /// answer every query (the store can).
    private(set) var truncated = false

    init(historyLimit: Int) {
        ring = Ring(capacity: min(historyLimit, Limits.historyMemoryMessagesPerRoom))
    }

    /// A window as another was (a snapshot's): its capacity, messages, bytes and whether it dropped any.
    init(capacity: Int, messages: [ChatMessage], bytes: Int, truncated: Bool) {
        ring = Ring(capacity: capacity, elements: messages)
        self.bytes = bytes
        self.truncated = truncated
    }

    var capacity: Int { ring.capacity }
    var messages: [ChatMessage] { ring.elements }

    var count: Int { ring.count }
    subscript(i: Int) -> ChatMessage { ring[i] }

    mutating func append(_ m: ChatMessage) {
        if let evicted = ring.append(m) {
            bytes -= evicted.content.utf8.count
            truncated = true
        }
        bytes += m.content.utf8.count
        if bytes > Limits.historyMemoryBytesPerRoom {
            var drop = 0
            var left = bytes
            while left > Limits.historyMemoryBytesPerRoom && drop < ring.count - 1 {
                left -= ring[drop].content.utf8.count
                drop += 1
            }
            if drop > 0 {
                ring.dropOldest(drop)
                bytes = left
                truncated = true
            }
        }
    }

    /// MO-1: the position of a message, newest first (a recall is usually of a recent one).
    func index(of id: String) -> Int? {
        var i = ring.count - 1
        while i >= 0 {
            if ring[i].id == id { return i }
            i -= 1
        }
        return nil
    }

    /// MO-1: puts the message at `i` in place of what was there (its tombstone), keeping the count
    /// of content bytes.
    mutating func replace(at i: Int, with m: ChatMessage) {
        bytes += m.content.utf8.count - ring[i].content.utf8.count
        ring[i] = m
    }

    /// Drops messages past the retention (they are gone from the store too).
    mutating func dropOlder(than oldest: Int64) {
        // Called for every message sent: nothing to drop is the common case, and costs one look.
        guard !ring.isEmpty, ring[0].time < oldest else { return }
        ring.dropOldest { $0.time < oldest }
        bytes = ring.elements.reduce(0) { $0 + $1.content.utf8.count }
    }
}

/// A user's sessions, in a room (`Member.sessions`) or online in an app: nearly always one, held
/// inline, so the common case allocates no array (about 56 bytes of heap each); a second and later
/// ones go to the array.
public typealias SessionList = SmallList<SessionID>

/// A list that is nearly always of one element: the first held inline, so the common case
/// allocates no array; two or more go to an array. Its representation is canonical (none, one
/// inline, or an array of two or more in order), so equal lists compare equal case by case.
/// One enum, not an optional and an array: 9 bytes for an 8-byte element (a session id), so a
/// record that holds one can put its small fields in the padding after it.
public struct SmallList<Element: Equatable & Sendable>: RandomAccessCollection, Equatable, Sendable, ExpressibleByArrayLiteral,
    CustomStringConvertible {
    private enum Storage: Equatable, Sendable {
        case none
        case one(Element)
        /// Two or more.
        case many([Element])
    }
    private var storage: Storage = .none

    public init() {}
    public init(arrayLiteral elements: Element...) { self.init(elements) }
    public init<S: Sequence>(_ elements: S) where S.Element == Element {
        var all = Array(elements)
        switch all.count {
        case 0: storage = .none
        case 1: storage = .one(all.removeLast())
        default: storage = .many(all)
        }
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int {
        switch storage {
        case .none: 0
        case .one: 1
        case .many(let all): all.count
        }
    }
    public var isEmpty: Bool { if case .none = storage { true } else { false } }
    public subscript(position: Int) -> Element {
        switch storage {
        case .one(let e) where position == 0: return e
        case .many(let all) where position >= 0 && position < all.count: return all[position]
        default: preconditionFailure("SmallList index out of range")
        }
    }

    public mutating func append(_ e: Element) {
        switch storage {
        case .none: storage = .one(e)
        case .one(let first): storage = .many([first, e])
        case .many(var all):
            storage = .none  // the array's only reference is now `all`: appended in place
            all.append(e)
            storage = .many(all)
        }
    }

    @discardableResult
    public mutating func remove(at position: Int) -> Element {
        precondition(position >= 0 && position < endIndex, "SmallList index out of range")
        switch storage {
        case .none: preconditionFailure("SmallList index out of range")
        case .one(let e):
            storage = .none
            return e
        case .many(var all):
            storage = .none
            let removed = all.remove(at: position)
            storage = all.count == 1 ? .one(all[0]) : .many(all)
            return removed
        }
    }

    public mutating func removeAll(where shouldRemove: (Element) -> Bool) {
        guard contains(where: shouldRemove) else { return }
        self = SmallList(filter { !shouldRemove($0) })
    }

    public var description: String { Array(self).description }
}
