import Chat

/// A session's position in each of its rooms' member lists on its loop (kept by the hub). Nearly
/// every session is in one room: that one is held inline, so an idle joined session carries no
/// dictionary (about 140 bytes of heap each); further rooms go to the dictionary.
struct RoomSlots {
    private var first: RoomKey?
    private var firstSlot = 0
    private var rest: [RoomKey: Int] = [:]

    subscript(key: RoomKey) -> Int? {
        get {
            if let first, first == key { return firstSlot }
            return rest.isEmpty ? nil : rest[key]
        }
        set {
            if let first, first == key {
                if let newValue { firstSlot = newValue } else { self.first = nil }
            } else if first == nil, let newValue, rest[key] == nil {
                first = key
                firstSlot = newValue
            } else {
                rest[key] = newValue
            }
        }
    }

    @discardableResult
    mutating func removeValue(forKey key: RoomKey) -> Int? {
        guard let slot = self[key] else { return nil }
        self[key] = nil
        return slot
    }

    /// How many rooms it holds.
    var count: Int { (first == nil ? 0 : 1) + rest.count }

    /// The rooms, in no particular order.
    var keys: [RoomKey] {
        var all = Array(rest.keys)
        if let first { all.append(first) }
        return all
    }
}

/// One user's sessions on a loop. Nearly every user has one: it is held inline, without an array
/// (about 50 bytes of heap a user).
struct UserSessions {
    private var first: ClientSession?
    private var rest: [ClientSession] = []

    init(_ s: ClientSession) { first = s }

    mutating func append(_ s: ClientSession) {
        if first == nil { first = s } else { rest.append(s) }
    }

    mutating func remove(_ s: ClientSession) {
        if first === s {
            // The next oldest takes its place (registration order is kept).
            first = rest.isEmpty ? nil : rest.removeFirst()
        } else {
            rest.removeAll { $0 === s }
        }
    }

    var isEmpty: Bool { first == nil }

    func forEach(_ body: (ClientSession) -> Void) {
        if let first { body(first) }
        for s in rest { body(s) }
    }

    var all: [ClientSession] {
        var list: [ClientSession] = []
        forEach { list.append($0) }
        return list
    }
}
