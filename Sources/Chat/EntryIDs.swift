/// Ids for a domain that replays the cluster's shared log (CLUSTER.md): derived from the entry
/// being applied — its time and its position — and a counter within the entry, never from a
/// node's clock or random generator, so every node that applies the same entries makes the same
/// ids (messages, room epochs, anonymous users). Unique because positions are.
///
/// Confined to the thread that applies the log (the engine's), as the domain is.
public final class EntryIDs {
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

    /// The next id: time (base 36, so ids sort by time), position and counter.
    public func next() -> String {
        counter += 1
        return String(UInt64(max(0, at)), radix: 36) + "-" + String(UInt64(max(0, position)), radix: 36) + "-" + String(counter, radix: 36)
    }
}
