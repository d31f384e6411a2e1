import Foundation
import GRDB

/// The store's schema version (OP-3): the migrations a data directory has had, against those this
/// build knows. Migrations are named `vN-…` and applied in order, so the version is the number of
/// the newest one applied. A database with a migration this build does not know was written by a
/// newer roomcast: it is refused before anything is written to it (GRDB's migrator would
/// otherwise skip the unknown ones and go on writing through a schema it does not understand).
public enum SchemaVersion {
    /// The migrations this build knows, in order.
    public static var known: [String] { Schema.migrator.migrations }
    /// The version this build writes: the number of its newest migration.
    public static var current: Int { number(known.last ?? "") ?? known.count }

    /// `N` of a migration named `vN-…`.
    static func number(_ identifier: String) -> Int? {
        guard identifier.first == "v" else { return nil }
        return Int(identifier.dropFirst().prefix { $0.isNumber })
    }

    /// What a database holds, as far as its schema goes.
    public struct State: Sendable, Equatable {
        /// Every migration it has had, known or not, in name order.
        public var applied: [String]
        /// Those this build does not know (from a newer roomcast).
        public var unknown: [String]
        /// Those this build knows and it has not had yet (it is from an older roomcast, or new).
        public var pending: [String]

        /// The database's version: its newest migration's number (0 for a new database).
        public var version: Int { applied.compactMap(SchemaVersion.number).max() ?? 0 }
        public var isNewer: Bool { !unknown.isEmpty }
        public var isCurrent: Bool { unknown.isEmpty && pending.isEmpty }
    }

    /// Reads a database's schema state (any connection; writes nothing).
    public static func state(_ db: Database) throws -> State {
        let applied: [String]
        if try db.tableExists("grdb_migrations") {
            applied = try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
        } else {
            applied = []
        }
        let knownSet = Set(known)
        let appliedSet = Set(applied)
        return State(applied: applied.sorted { (number($0) ?? 0, $0) < (number($1) ?? 0, $1) },
                     unknown: applied.filter { !knownSet.contains($0) }.sorted(),
                     pending: known.filter { !appliedSet.contains($0) })
    }

    /// Refuses a database written by a newer roomcast, before anything is written to it.
    static func refuseNewer(_ reader: any DatabaseReader, path: String) throws {
        let s = try reader.read { try state($0) }
        if s.isNewer { throw SchemaError.newer(path: path, state: s) }
    }

    /// The same for the file at `path`, read through a read-only connection before any pool is
    /// opened on it (opening a WAL pool writes: GRDB makes sure a WAL file exists).
    static func refuseNewer(path: String) throws {
        guard FileManager.default.fileExists(atPath: path) else { return }
        var configuration = Configuration()
        configuration.readonly = true
        configuration.label = "roomcast-schema-check"
        do {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            try refuseNewer(queue, path: path)
        } catch let e as SchemaError {
            throw e
        } catch {
            // Not readable this way (e.g. a crash left a WAL without its index): the check made
            // once the pool is open still refuses a newer schema before anything else is written.
        }
    }
}

/// A data directory this build cannot use as it is.
public enum SchemaError: Error, Equatable, CustomStringConvertible {
    /// Written by a newer roomcast: a migration this build does not know was applied to it.
    case newer(path: String, state: SchemaVersion.State)
    /// The running node is an older roomcast than this command: this command would migrate the
    /// database under it.
    case olderThanThisCommand(path: String, state: SchemaVersion.State)

    public var description: String {
        switch self {
        case .newer(let path, let s) where s.version > SchemaVersion.current:
            return "\(path) was written by a newer roomcast (schema version \(s.version), with \(s.unknown.joined(separator: ", "))); "
                + "this roomcast knows schema versions up to \(SchemaVersion.current). Nothing was changed. "
                + "Run the roomcast that wrote it (or a newer one), or restore a backup taken with this version."
        case .newer(let path, let s):
            return "\(path) was written by a roomcast build this one does not know: it has \(s.unknown.joined(separator: ", ")), "
                + "which is not one of this build's migrations (up to schema version \(SchemaVersion.current)). Nothing was changed. "
                + "Run the roomcast that wrote it, or restore a backup taken with this version."
        case .olderThanThisCommand(let path, let s):
            return "\(path) is in use by a node of an older roomcast (schema version \(s.version); this command's is \(SchemaVersion.current)). "
                + "Nothing was changed. Use that node's own roomcast binary, or stop the node first (this roomcast migrates the directory when it starts)."
        }
    }
}
