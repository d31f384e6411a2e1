import Foundation
import Reactor
#if canImport(Glibc)
import Glibc
#endif

/// A node's data directory: where its database lives, and the lock that says a node (or a
/// restore) is using it (OP-1). The lock is an exclusive `flock` on `roomcast.lock`, held for as
/// long as the process runs: the kernel releases it when the process ends, however it ends
/// (`kill -9` included), so a stale lock file never blocks anything.
public enum DataDirectory {
    public static let databaseName = "roomcast.sqlite"
    public static let lockName = "roomcast.lock"
    /// CL-9: a cluster node's replica (made anew from the log at every start).
    public static let replicaName = "replica.sqlite"
    /// CL-9: beside the replica (its name plus this), the leader's copy of it while it publishes
    /// a snapshot (`ReplicaImage`: unlinked as soon as it is made, so never seen for long).
    public static let replicaSnapshotSuffix = ".snapshot"
    /// CL-9: beside the replica, a starting node's download of the cluster snapshot's replica
    /// (moved to `replicaName` once whole, checked and opened).
    public static let replicaDownloadSuffix = ".download"
    /// CL-9: beside the replica, where a node that stopped cleanly recorded the position its
    /// replica holds and the engine's state there (read and removed at the next start, which
    /// catches up from there when the cluster's log still holds that position).
    public static let replicaCheckpointSuffix = ".checkpoint"

    public static func databasePath(_ directory: String) -> String { directory + "/" + databaseName }

    /// fsync of a file's contents (the backup's copy, a replica, a checkpoint).
    public static func syncFile(_ path: String) throws(SyscallError) {
        let fd = try syscallChecked("open") { open(path, O_RDONLY | O_CLOEXEC) }
        defer { close(fd) }
        try syscallChecked("fsync") { fsync(fd) }
    }

    /// fsync of the directory holding `path`, so a name made, renamed or removed there is durable.
    public static func syncDirectory(of path: String) throws(SyscallError) {
        let directory = (path as NSString).deletingLastPathComponent
        let fd = try syscallChecked("open") { open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { close(fd) }
        try syscallChecked("fsync") { fsync(fd) }
    }

    /// The database and its WAL companions.
    public static func databaseFiles(_ directory: String) -> [String] {
        ["", "-wal", "-shm"].map { databasePath(directory) + $0 }
    }

    /// Whether the directory holds anything but the lock file (a missing directory is empty).
    public static func isEmpty(_ directory: String) -> Bool {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return entries.allSatisfy { $0 == lockName }
    }

    public static func hasDatabase(_ directory: String) -> Bool {
        FileManager.default.fileExists(atPath: databasePath(directory))
    }

    /// Whether a process (a node, a restore) holds the directory's lock: nil when none does, else
    /// the lock's failure (with the holder's pid when it wrote one). Takes the lock for an
    /// instant if it is free, and creates the lock file if the directory exists.
    public static func inUse(_ directory: String) -> DataDirectoryLock.Failure? {
        guard FileManager.default.fileExists(atPath: directory) else { return nil }
        do {
            let lock = try DataDirectoryLock(directory: directory)
            lock.release()
            return nil
        } catch let e as DataDirectoryLock.Failure {
            return e
        } catch {
            return nil
        }
    }
}

/// The exclusive lock on a data directory, held until released or the process ends.
public final class DataDirectoryLock: @unchecked Sendable {
    // Safety: `fd` is set once in init and only closed in `release`/deinit, which callers do not
    // race (the lock's owner releases it once).
    private var fd: Int32

    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// Another process holds it; its pid when it wrote one.
        case held(pid: Int32?)
        case cannotOpen(path: String, errno: Int32)

        public var description: String {
            switch self {
            case .held(let pid):
                return "a roomcast\(pid.map { " (pid \($0))" } ?? "") is using this data directory"
            case .cannotOpen(let path, let e):
                return "cannot open \(path): \(String(cString: strerror(e)))"
            }
        }
    }

    /// Takes the lock; throws `.held` if another process has it. `waitMilliseconds`: how long to
    /// keep trying first (another command's `inUse` probe holds it for an instant).
    public init(directory: String, waitMilliseconds: Int = 0) throws {
        let path = directory + "/" + DataDirectory.lockName
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw Failure.cannotOpen(path: path, errno: errno) }
        var waited = 0
        while flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK && waited < waitMilliseconds {
            usleep(20_000)
            waited += 20
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let busy = errno == EWOULDBLOCK
            let e = errno
            var buffer = [UInt8](repeating: 0, count: 32)
            let n = pread(fd, &buffer, buffer.count, 0)
            close(fd)
            if !busy { throw Failure.cannotOpen(path: path, errno: e) }
            let text = n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : ""
            throw Failure.held(pid: Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)))
        }
        // Who holds it, for the message another process prints.
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        self.fd = fd
    }

    /// Releases the lock (also done when the lock is released from memory).
    public func release() {
        guard fd >= 0 else { return }
        _ = ftruncate(fd, 0)
        close(fd)
        fd = -1
    }

    deinit { release() }
}
