import Chat

/// A session's position in each of its rooms' member lists on its loop (kept by the hub), by room id
/// (a session's rooms are all of its own app: `ClientSession.roomSlot(_:)` checks it). Nearly
/// every session is in one room: that one is held inline, so an idle joined session carries no
/// dictionary (about 140 bytes of heap each); further rooms go to the dictionary.
struct RoomSlots {
    private var first: String?
    private var firstSlot = 0
    private var rest: [String: Int] = [:]

    subscript(roomId: String) -> Int? {
        get {
            if let first, first == roomId { return firstSlot }
            return rest.isEmpty ? nil : rest[roomId]
        }
        set {
            if let first, first == roomId {
                if let newValue { firstSlot = newValue } else { self.first = nil }
            } else if first == nil, let newValue, rest[roomId] == nil {
                first = roomId
                firstSlot = newValue
            } else {
                rest[roomId] = newValue
            }
        }
    }

    @discardableResult
    mutating func removeValue(forKey roomId: String) -> Int? {
        guard let slot = self[roomId] else { return nil }
        self[roomId] = nil
        return slot
    }

    /// How many rooms it holds.
    var count: Int { (first == nil ? 0 : 1) + rest.count }

    /// The rooms, in no particular order.
    var keys: [String] {
        var all = Array(rest.keys)
        if let first { all.append(first) }
        return all
    }
}

/// One user's sessions on a loop, in registration order. Nearly every user has one: it is held
/// inline, without an array, and the whole is one word (a dictionary entry of 24 bytes a user).
struct UserSessions {
    private enum Storage {
        case none
        case one(ClientSession)
        /// Two or more.
        case many([ClientSession])
    }
    private var storage: Storage

    init(_ s: ClientSession) { storage = .one(s) }

    mutating func append(_ s: ClientSession) {
        switch storage {
        case .none: storage = .one(s)
        case .one(let first): storage = .many([first, s])
        case .many(var all):
            storage = .none  // `all` holds the array's only reference: appended in place
            all.append(s)
            storage = .many(all)
        }
    }

    mutating func remove(_ s: ClientSession) {
        switch storage {
        case .none: return
        case .one(let only): if only === s { storage = .none }
        case .many(var all):
            storage = .none
            all.removeAll { $0 === s }
            storage = all.count == 1 ? .one(all[0]) : (all.isEmpty ? .none : .many(all))
        }
    }

    var isEmpty: Bool { if case .none = storage { true } else { false } }

    func forEach(_ body: (ClientSession) -> Void) {
        switch storage {
        case .none: return
        case .one(let s): body(s)
        case .many(let all): for s in all { body(s) }
        }
    }

    var all: [ClientSession] {
        var list: [ClientSession] = []
        forEach { list.append($0) }
        return list
    }
}
