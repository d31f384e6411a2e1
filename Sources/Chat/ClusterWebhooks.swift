/// Webhooks in a cluster (CL-6, CLUSTER.md §7): what the shared log carries about endpoints and
/// deliveries, so that every node holds the same endpoints, stages the same messages (with the
/// same ids and sequence numbers) and records the same outcomes.

/// A node run's name in the log's `origin` column: the node's id and the run's incarnation
/// (`node#r<incarnation>`), so that every node can tell which run appended an entry — the run
/// that owns the webhook messages the entry causes.
public enum ClusterRun {
    public static func origin(node: String, incarnation: Int64) -> String {
        node + "#r" + String(incarnation)
    }

    /// The incarnation of the run that appended an entry; nil for an origin that
    /// `origin(node:incarnation:)` did not make.
    public static func incarnation(ofOrigin origin: String) -> UInt64? {
        guard let hash = origin.lastIndex(of: "#") else { return nil }
        let rest = origin.utf8[origin.utf8.index(after: hash)...]
        guard rest.first == UInt8(ascii: "r") else { return nil }
        let digits = rest.dropFirst()
        guard !digits.isEmpty, digits.count <= 19, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return UInt64(String(decoding: digits, as: UTF8.self))
    }
}
