import Foundation
import GRDB
import Reactor
#if canImport(Glibc)
import Glibc
#endif

/// Online backup and restore of a node's SQLite store (OP-1).
///
/// A backup is SQLite's online backup (through GRDB's `backup(to:pagesPerStep:progress:)`) run
/// inside one read transaction of the source: it copies the database as it was when that
/// transaction began (every change acknowledged before then, none after), while the node goes on
/// committing to the WAL beside it. It is written to a temporary name next to the destination,
/// made a self-contained rollback-journal database, synced, opened again and checked (SQLite's
/// `integrity_check` and the schema version), and only then renamed to the destination: a backup
/// that was interrupted (`kill -9`, a full disk) leaves at most a `*.partial-PID` file, never a
/// file under the destination's name that looks complete.
public enum StoreBackup {
    /// What a finished (or checked) backup holds.
    public struct Summary: Sendable, Equatable {
        public var path: String
        public var bytes: Int64
        public var pages: Int
        public var schemaVersion: Int
        public var milliseconds: Int64
        /// The phases of `milliseconds`: copying the pages, syncing the copy to disk, checking it.
        public var copyMilliseconds: Int64 = 0
        public var syncMilliseconds: Int64 = 0
        public var checkMilliseconds: Int64 = 0
    }

    public struct Progress: Sendable {
        public var copiedPages: Int
        public var totalPages: Int
    }

    /// How a backup paces itself. The copy is made `pagesPerStep` pages at a time; between steps
    /// it waits `pauseMicroseconds`, leaving the disk and the CPU to the node's own writes.
    public struct Pace: Sendable, Equatable {
        public var pagesPerStep: Int32
        public var pauseMicroseconds: UInt32
        /// The copy is written out to disk every this many bytes as it is made (and waited for),
        /// so that at no time more than this is waiting to be written: a large burst of dirty
        /// pages at the end would hold up the node's own syncs behind it. 0: only at the end.
        public var writeBackBytes: Int
        public init(pagesPerStep: Int32 = 1024, pauseMicroseconds: UInt32 = 0, writeBackBytes: Int = 16 << 20) {
            self.pagesPerStep = pagesPerStep
            self.pauseMicroseconds = pauseMicroseconds
            self.writeBackBytes = writeBackBytes
        }
    }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// The file is not a database this roomcast can use: not SQLite, damaged, or not a
        /// roomcast store.
        case notABackup(path: String, why: String)
        /// Written by a newer roomcast.
        case newer(path: String, version: Int)
        case io(path: String, why: String)

        public var description: String {
            switch self {
            case .notABackup(let path, let why): return "\(path) is not a usable roomcast backup: \(why)"
            case .newer(let path, let version):
                return "\(path) was written by a newer roomcast (schema version \(version); this one knows up to \(SchemaVersion.current))"
            case .io(let path, let why): return "\(path): \(why)"
            }
        }
    }

    /// The temporary name a backup is written under until it has been checked.
    public static func partialPath(_ destination: String) -> String { destination + ".partial-\(getpid())" }

    /// Copies `source` (a node's database) to `destination`, consistently, then checks the copy.
    public static func run(from source: any DatabaseReader, to destination: String, pace: Pace = Pace(),
                           now: () -> Int64 = wallClockMilliseconds, progress: ((Progress) -> Void)? = nil) throws -> Summary {
        let started = now()
        let partial = partialPath(destination)
        try? FileManager.default.removeItem(atPath: partial)
        do {
            var configuration = Configuration()
            configuration.label = "roomcast-backup"
            // The copy is checked before it gets its name: its own journal would only slow it.
            configuration.prepareDatabase { db in
                try db.execute(sql: "PRAGMA journal_mode = OFF")
                try db.execute(sql: "PRAGMA synchronous = OFF")
            }
            let copy = try DatabaseQueue(path: partial, configuration: configuration)
            let pageSize = try source.read { try Int.fetchOne($0, sql: "PRAGMA page_size") } ?? 4096
            let writeBack = WriteBack(path: partial, every: pace.writeBackBytes)
            defer { writeBack.close() }
            try source.backup(to: copy, pagesPerStep: pace.pagesPerStep) { p in
                progress?(Progress(copiedPages: p.completedPageCount, totalPages: p.totalPageCount))
                writeBack.written(upTo: Int64(p.completedPageCount) * Int64(pageSize))
                if !p.isCompleted && pace.pauseMicroseconds > 0 { usleep(pace.pauseMicroseconds) }
            }
            // A file of its own: no WAL to carry beside it (the node's page 1 says WAL).
            try copy.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = DELETE") }
            try copy.close()
            let copied = now()
            try sync(partial)
            let synced = now()
            var summary = try check(partial)
            let checked = now()
            try rename(partial, to: destination)
            summary.path = destination
            summary.milliseconds = now() - started
            summary.copyMilliseconds = copied - started
            summary.syncMilliseconds = synced - copied
            summary.checkMilliseconds = checked - synced
            return summary
        } catch {
            try? FileManager.default.removeItem(atPath: partial)
            throw error
        }
    }

    /// Opens a backup (read-only) and checks it: SQLite's `integrity_check`, a roomcast store, a
    /// schema version this build can open.
    public static func check(_ path: String) throws -> Summary {
        guard FileManager.default.fileExists(atPath: path) else { throw Failure.io(path: path, why: "no such file") }
        let queue: DatabaseQueue
        do {
            var configuration = Configuration()
            configuration.readonly = true
            configuration.label = "roomcast-backup-check"
            queue = try DatabaseQueue(path: path, configuration: configuration)
        } catch {
            throw Failure.notABackup(path: path, why: "\(error)")
        }
        defer { try? queue.close() }
        return try queue.read { db in
            // Read through a memory map: the check reads the whole file, and copying every page
            // out of the page cache with read(2) costs more CPU than the check itself.
            _ = try? String.fetchOne(db, sql: "PRAGMA mmap_size = 2147418112")
            let integrity: [String]
            do {
                integrity = try String.fetchAll(db, sql: "PRAGMA integrity_check")
            } catch {
                throw Failure.notABackup(path: path, why: "\(error)")
            }
            guard integrity == ["ok"] else {
                throw Failure.notABackup(path: path, why: "integrity check: " + integrity.prefix(3).joined(separator: "; "))
            }
            let state = try SchemaVersion.state(db)
            guard state.applied.contains(SchemaVersion.known[0]), try db.tableExists("app") else {
                throw Failure.notABackup(path: path, why: "it has no roomcast schema")
            }
            if state.isNewer { throw Failure.newer(path: path, version: state.version) }
            let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
            return Summary(path: path, bytes: size, pages: pages, schemaVersion: state.version, milliseconds: 0)
        }
    }

    // MARK: Restore

    public enum RestoreFailure: Error, Equatable, CustomStringConvertible {
        /// A node (or another restore) holds the directory.
        case inUse(directory: String, pid: Int32?)
        /// The directory holds files already, and `force` was not given.
        case notEmpty(directory: String)

        public var description: String {
            switch self {
            case .inUse(let directory, let pid):
                return "a roomcast\(pid.map { " (pid \($0))" } ?? "") is running on \(directory); stop it first. Nothing was changed."
            case .notEmpty(let directory):
                return "\(directory) is not empty; restore into an empty directory, or give --force to replace its database "
                    + "(the replaced files are moved into a replaced-* folder inside it). Nothing was changed."
            }
        }
    }

    public struct Restored: Sendable, Equatable {
        public var backup: Summary
        /// Where the database files that were replaced went (`force`), if there were any.
        public var replacedInto: String?
    }

    /// Puts the backup at `file` into `directory` as its database. Refused while a node runs on
    /// the directory (its lock is held for the whole restore, so none can start meanwhile), when
    /// the file is not a usable backup, and when the directory is not empty unless `force`; with
    /// `force` the database files it had are moved into `replaced-<time>/` beside it. The
    /// database's schema is migrated when a node next starts on it.
    public static func restore(from file: String, into directory: String, force: Bool, now: () -> Int64 = wallClockMilliseconds) throws -> Restored {
        let backup = try check(file)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let lock: DataDirectoryLock
        do {
            lock = try DataDirectoryLock(directory: directory, waitMilliseconds: 1000)
        } catch DataDirectoryLock.Failure.held(let pid) {
            throw RestoreFailure.inUse(directory: directory, pid: pid)
        }
        defer { lock.release() }
        if !DataDirectory.isEmpty(directory) && !force { throw RestoreFailure.notEmpty(directory: directory) }
        let target = DataDirectory.databasePath(directory)
        let incoming = target + ".restoring"
        try? FileManager.default.removeItem(atPath: incoming)
        do {
            try FileManager.default.copyItem(atPath: file, toPath: incoming)
            try sync(incoming)
        } catch {
            try? FileManager.default.removeItem(atPath: incoming)
            throw Failure.io(path: incoming, why: "\(error)")
        }
        var replacedInto: String?
        let present = DataDirectory.databaseFiles(directory).filter { FileManager.default.fileExists(atPath: $0) }
        if !present.isEmpty {
            let aside = directory + "/replaced-" + timestamp(now())
            try FileManager.default.createDirectory(atPath: aside, withIntermediateDirectories: true)
            for path in present {
                try FileManager.default.moveItem(atPath: path, toPath: aside + "/" + (path as NSString).lastPathComponent)
            }
            replacedInto = aside
        }
        try rename(incoming, to: target)
        return Restored(backup: backup, replacedInto: replacedInto)
    }

    // MARK: Files

    /// Writes a growing file out to disk behind its writer, a range at a time (Linux
    /// `sync_file_range`, looked up at run time: Swift's Glibc module does not declare it).
    final class WriteBack {
        private typealias SyncFileRange = @convention(c) (Int32, Int64, Int64, UInt32) -> Int32
        private static let syncFileRange: SyncFileRange? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sync_file_range")
            .map { unsafeBitCast($0, to: SyncFileRange.self) }
        // SYNC_FILE_RANGE_WAIT_BEFORE | WRITE | WAIT_AFTER
        private static let writeAndWait: UInt32 = 1 | 2 | 4
        private let fd: Int32
        private let every: Int64
        private var flushed: Int64 = 0

        init(path: String, every: Int) {
            self.every = Int64(every)
            fd = every > 0 && Self.syncFileRange != nil ? open(path, O_RDONLY | O_CLOEXEC) : -1
        }

        /// The file is written up to `offset`: each whole `every` bytes past the last range is
        /// written out now.
        func written(upTo offset: Int64) {
            guard fd >= 0, let sync = Self.syncFileRange, offset - flushed >= every else { return }
            _ = sync(fd, flushed, offset - flushed, Self.writeAndWait)
            flushed = offset
        }

        func close() {
            if fd >= 0 { _ = Glibc.close(fd) }
        }
    }

    /// `YYYYmmdd-HHMMSS` (UTC) of a time in milliseconds: backup and replaced-folder names.
    public static func timestamp(_ milliseconds: Int64) -> String {
        var t = time_t(milliseconds / 1000)
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(format: "%04d%02d%02d-%02d%02d%02d", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec)
    }

    /// fsync of a file's contents.
    static func sync(_ path: String) throws {
        do { try DataDirectory.syncFile(path) } catch { throw Failure.io(path: path, why: "\(error)") }
    }

    /// rename(2), then an fsync of the directory so the new name is durable too.
    static func rename(_ from: String, to: String) throws {
        do {
            try syscallChecked("rename") { Glibc.rename(from, to) }
            try DataDirectory.syncDirectory(of: to)
        } catch {
            throw Failure.io(path: to, why: "\(error)")
        }
    }
}
