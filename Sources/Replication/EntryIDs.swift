import Chat

/// Ids for a domain that replays the cluster's shared log (CLUSTER.md): derived from the entry
/// being applied — its time and its position — and a counter within the entry, never from a
/// node's clock or random generator, so every node that applies the same entries makes the same
/// ids (messages, room epochs, anonymous users). Unique because positions are.
///
/// Confined to the thread that applies the log (the engine's), as the domain is.
public final class EntryIDs: @unchecked Sendable {
    // Safety: created on one thread and handed to the engine; from then on `begin` and `next`
    // are called only on the engine's thread (applying an entry), never concurrently.
    private var at: Int64 = 0
    private var position: Int64 = 0
    private var counter = 0

    public init() {}

    /// Called before each entry is applied.
    public func begin(position: Int64, at: Int64) {
        self.position = position
        self.at = at
        counter = 0
    }

    /// The next id: time, position and counter in base 36, each padded to a fixed width, so ids
    /// sort by time and then by log order (history is ordered by time, then id).
    public func next() -> String {
        counter += 1
        return Self.pad(UInt64(max(0, at)), 9) + "-" + Self.pad(UInt64(max(0, position)), 13) + "-" + Self.pad(UInt64(counter), 4)
    }

    static func pad(_ v: UInt64, _ width: Int) -> String {
        let s = String(v, radix: 36)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }
}

/// What makes the domain's ids (messages, room epochs, anonymous users) while the engine applies
/// a log entry: `begin` is called before each entry, `next` by the domain. A property of the log
/// the engine follows: a cluster derives them from the entry (`EntryIDs`, the same on every
/// node); a single node makes fresh ones that stay unique across its restarts (its log's
/// positions start again with each run).
public protocol EntryIDMaker: AnyObject, Sendable {
    func begin(position: Int64, at: Int64)
    func next() -> String
}

extension EntryIDs: EntryIDMaker {}
