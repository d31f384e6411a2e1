import Cluster
import Engine
import Foundation
import Logging
import Reactor
import Store
#if canImport(Glibc)
import Glibc
#endif

/// CL-9, catch-up from a node's own position (CLUSTER.md "Snapshots and trimming"): a node that
/// stops cleanly records, beside its replica, the log position its replica holds and the engine's
/// state there (the same state a cluster snapshot carries). At its next start, when the cluster's
/// log still holds that position (the same entry: same origin and sequence number, in the same
/// cluster), it opens the replica as it is and applies only the entries after it, instead of
/// downloading the newest snapshot. Written after the replica is synced to disk; read and removed
/// before the replica is opened for writing, so a run that crashes leaves no checkpoint behind
/// and its next start loads the snapshot.
struct LocalCheckpoint: Codable {
    static let version = 1

    var version = LocalCheckpoint.version
    /// The cluster's identity (`ClusterSettings.id`) and this node's name.
    var cluster: String
    var node: String
    /// The log position the replica holds, and the entry there.
    var position: Int64
    var origin: String
    var seq: Int64
    /// The engine's state at `position` (its `SnapshotState.version` is checked when decoded).
    var state: SnapshotState

    /// Writes the checkpoint to `path` (through a temporary file, synced, then renamed).
    func write(to path: String) throws {
        let bytes = Array(try JSONEncoder().encode(self))
        let temporary = path + ".tmp"
        let fd = try syscallChecked("open") { open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600) }
        do {
            var written = 0
            while written < bytes.count {
                written += try bytes.withUnsafeBytes { raw in
                    try syscallChecked("write") { Glibc.write(fd, raw.baseAddress! + written, raw.count - written) }
                }
            }
            try syscallChecked("fsync") { fsync(fd) }
            close(fd)
            try syscallChecked("rename") { rename(temporary, path) }
        } catch {
            close(fd)
            unlink(temporary)
            throw error
        }
        // The rename itself reaches the disk.
        try DataDirectory.syncDirectory(of: path)
    }

    /// Reads the checkpoint at `path` and removes it (it describes the replica only until the
    /// replica is opened for writing). Nil when there is none or it cannot be read.
    static func take(_ path: String, logger: Logger) -> LocalCheckpoint? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let contents = try? Data(contentsOf: URL(fileURLWithPath: path))
        // Gone for good before the replica is written to (removed and the removal synced), or not
        // used: a record left behind would describe a replica that has moved on.
        do {
            try syscallChecked("unlink") { unlink(path) }
            try DataDirectory.syncDirectory(of: path)
        } catch {
            logger.warning("cluster: the replica's checkpoint could not be removed; starting from the cluster's snapshot", metadata: ["error": "\(error)"])
            return nil
        }
        do {
            guard let contents else { throw CocoaError(.fileReadUnknown) }
            let checkpoint = try JSONDecoder().decode(LocalCheckpoint.self, from: contents)
            guard checkpoint.version == version, (1...SnapshotState.version).contains(checkpoint.state.version) else {
                logger.info("cluster: the replica's checkpoint is of another version; starting from the cluster's snapshot")
                return nil
            }
            return checkpoint
        } catch {
            logger.warning("cluster: the replica's checkpoint cannot be read; starting from the cluster's snapshot", metadata: ["error": "\(error)"])
            return nil
        }
    }
}
