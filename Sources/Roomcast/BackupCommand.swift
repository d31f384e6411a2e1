import ArgumentParser
import Foundation
import Gateway
import Store
#if canImport(Glibc)
import Glibc
#endif

/// `roomcast backup` (OP-1): a consistent copy of a data directory's database, taken while a node
/// serves it.
struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copy a node's database to a file, consistently, while the node serves (online backup).",
        discussion: """
            The copy is SQLite's online backup inside one read transaction: it holds every change the node had \
            acknowledged when the copy began and none made after, and the node keeps serving (its writes go on \
            beside the copy). The file is written under FILE.partial-PID, synced, opened again and checked \
            (integrity_check and the schema version), and only then renamed to FILE: an interrupted backup never \
            leaves a file under FILE's name. Progress is shown when standard error is a terminal. \
            A running node can also be backed up with POST /v1/admin/backup (operator API). \
            A cluster's data is in PostgreSQL: back it up with pg_dump or point-in-time recovery; a node's data \
            directory there holds only its node-id, and a node with an empty one rejoins.
            Example: roomcast backup --data-dir ./roomcast-data --to /backups/roomcast-$(date +%F).sqlite
            """)

    @OptionGroup var data: DataDirectoryOption

    @Option(help: "The backup file to write (replaced atomically if it exists).")
    var to: String

    @Option(help: "Pages copied per step (4 KiB each); smaller steps yield the disk to the node more often.")
    var pagesPerStep: Int32 = 1024

    @Option(help: "Milliseconds to pause between steps (0: none); slows the backup, spares the node.")
    var pauseMs: UInt32 = 0

    func validate() throws {
        guard pagesPerStep >= 1 else { throw ValidationError("--pages-per-step must be at least 1") }
        guard pauseMs <= 10_000 else { throw ValidationError("--pause-ms must be at most 10000") }
        guard (0...19).contains(nice) else { throw ValidationError("--nice must be 0 to 19") }
        guard !to.isEmpty, !to.hasSuffix("/") else { throw ValidationError("--to must name a file") }
    }

    @Option(help: "Nice value the backup runs at (0-19): the node's threads get the CPU first.")
    var nice: Int32 = 10

    func run() throws {
        // Set before any thread starts: the threads that copy and check inherit it.
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, nice)
        try refusing {
            let file = try StoreFile(directory: data.dataDir, create: false, migrate: false)
            let terminal = standardErrorIsTerminal
            var lastShown = -1
            let summary = try file.backup(to: to, pace: StoreBackup.Pace(pagesPerStep: pagesPerStep, pauseMicroseconds: pauseMs * 1000)) { p in
                guard terminal, p.totalPages > 0 else { return }
                let percent = p.copiedPages * 100 / p.totalPages
                guard percent != lastShown else { return }
                lastShown = percent
                FileHandle.standardError.write(Data("\rbacking up: \(percent)% (\(p.copiedPages)/\(p.totalPages) pages)".utf8))
            }
            if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
            print("backup written: \(summary.path) (\(humanBytes(summary.bytes)), schema version \(summary.schemaVersion), "
                  + "integrity ok, \(summary.milliseconds) ms: copy \(summary.copyMilliseconds), sync \(summary.syncMilliseconds), "
                  + "check \(summary.checkMilliseconds))\(file.nodeRunning ? " while a node served the directory" : "")")
        }
    }
}

/// `roomcast restore` (OP-1): a backup becomes a data directory's database.
struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Put a backup into a data directory (refused while a node runs on it).",
        discussion: """
            The backup is checked first (integrity_check, a roomcast schema no newer than this build's). Refused, \
            with nothing changed: while a node (or another restore) runs on the directory — the directory's lock \
            is held for the whole restore, so none can start meanwhile; when the directory is not empty, unless \
            --force, which moves the database files it has into replaced-YYYYmmdd-HHMMSS/ inside it. The node \
            that next starts on the directory migrates it if the backup came from an earlier roomcast.
            Example: roomcast restore --from /backups/roomcast-2026-11-28.sqlite --data-dir ./roomcast-data
            """)

    @Option(help: "The backup file (made by roomcast backup or POST /v1/admin/backup).")
    var from: String

    @OptionGroup var data: DataDirectoryOption

    @Flag(help: "Replace the directory's database (the replaced files are moved into replaced-*/ inside it).")
    var force = false

    func run() throws {
        try refusing {
            let restored = try StoreBackup.restore(from: from, into: data.dataDir, force: force)
            print("restored \(from) into \(data.dataDir) (\(humanBytes(restored.backup.bytes)), schema version \(restored.backup.schemaVersion))")
            if let aside = restored.replacedInto { print("the database it replaced is in \(aside)") }
            print("start roomcast with --data-dir \(data.dataDir) to serve it")
        }
    }
}
