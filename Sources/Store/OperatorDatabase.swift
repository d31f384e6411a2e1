import Chat
import Foundation
import GRDB
import Reactor

/// A database the operator's commands act on (OP-1, OP-2): a running node's own `Store`, or a data
/// directory opened by `roomcast apps` / `roomcast backup` in another process (`StoreFile`). Callers
/// need not know GRDB.
public protocol OperatorDatabase: Sendable {
    var database: any DatabaseWriter { get }
}

extension Store: OperatorDatabase {}

extension OperatorDatabase {
    /// The apps, and the generation that says which change they reflect.
    public func operatorApps() throws -> (generation: Int64, apps: [OperatorApp]) {
        try database.read { db in (try OperatorApps.generation(db), try OperatorApps.list(db)) }
    }

    public func operatorAppsGeneration() throws -> Int64 {
        try database.read { db in try OperatorApps.generation(db) }
    }

    public func app(_ key: String) throws -> OperatorApp? {
        try database.read { db in try OperatorApps.find(db, key) }
    }

    public func addApp(key: String, secret: String, now: Int64) throws -> OperatorApp {
        try database.write { db in try OperatorApps.add(db, key: key, secret: secret, now: now) }
    }

    public func rotateAppSecret(key: String, secret: String, now: Int64, graceMilliseconds: Int64) throws -> OperatorApp {
        try database.write { db in try OperatorApps.rotateSecret(db, key: key, secret: secret, now: now, graceMilliseconds: graceMilliseconds) }
    }

    public func setAppActive(key: String, _ active: Bool) throws -> OperatorApp {
        try database.write { db in try OperatorApps.setActive(db, key: key, active) }
    }

    public func removeApp(key: String, nodeRunning: Bool) throws -> OperatorApps.Removal {
        try database.write { db in try OperatorApps.remove(db, key: key, nodeRunning: nodeRunning) }
    }

    /// A consistent copy of the database at `path` (see `StoreBackup.run`).
    public func backup(to path: String, pace: StoreBackup.Pace = StoreBackup.Pace(),
                       progress: ((StoreBackup.Progress) -> Void)? = nil) throws -> StoreBackup.Summary {
        try StoreBackup.run(from: database, to: path, pace: pace, progress: progress)
    }
}

/// A data directory's database opened by an operator command in its own process, whether or not
/// a node runs on the directory. It never writes through a schema it does not know: a database
/// from a newer roomcast is refused, and one from an older roomcast is migrated only when no node
/// runs on it (the node would otherwise run on a schema it does not know).
public final class StoreFile: OperatorDatabase {
    public let database: any DatabaseWriter
    public let path: String
    /// Whether a node (or a restore) held the directory when it was opened.
    public let nodeRunning: Bool
    public let state: SchemaVersion.State

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case noDatabase(directory: String)

        public var description: String {
            switch self {
            case .noDatabase(let directory):
                return "\(directory) holds no roomcast database (\(DataDirectory.databaseName)); start a node on it first, or check --data-dir"
            }
        }
    }

    /// Opens `directory`'s database. `create`: make (and migrate) one if there is none — for
    /// commands that add apps before a node's first start.
    public init(directory: String, create: Bool, migrate: Bool) throws {
        path = DataDirectory.databasePath(directory)
        if !FileManager.default.fileExists(atPath: path) {
            guard create else { throw Failure.noDatabase(directory: directory) }
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        // Checked before the pool opens the file (opening it writes).
        try SchemaVersion.refuseNewer(path: path)
        nodeRunning = { if case .held = DataDirectory.inUse(directory) { return true } else { return false } }()
        var configuration = Configuration()
        configuration.label = "roomcast-operator"
        configuration.busyMode = .timeout(10)
        configuration.foreignKeysEnabled = true
        // A backup reads the whole file: through a memory map it costs the machine (the node's
        // cores) far less than copying every page out with read(2).
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA mmap_size = 2147418112") }
        let pool = try DatabasePool(path: path, configuration: configuration)
        let found = try pool.read { try SchemaVersion.state($0) }
        if found.isNewer { throw SchemaError.newer(path: path, state: found) }
        if migrate && !found.pending.isEmpty {
            if nodeRunning { throw SchemaError.olderThanThisCommand(path: path, state: found) }
            try Schema.migrator.migrate(pool)
        }
        database = pool
        state = try pool.read { try SchemaVersion.state($0) }
    }
}
