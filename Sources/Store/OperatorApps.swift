import Chat
import Foundation
import GRDB

/// An app as the operator sees it (OP-2): its key, its secrets and whether it serves.
public struct OperatorApp: Sendable, Equatable {
    public enum Status: String, Sendable, CaseIterable {
        /// Serves.
        case active
        /// Refused (signed calls, token minting, connections) until enabled again; its data is kept.
        case disabled
        /// Removed while its node ran: refused like a disabled app, and deleted with all its
        /// data when the node next starts.
        case removing
    }
    public var key: String
    public var secret: String
    /// The secret before the last rotation, accepted until `previousSecretExpiresAt` (ms).
    public var previousSecret: String?
    public var previousSecretExpiresAt: Int64?
    /// `config` (--app), `dev` (made on first start) or `api` (the operator's).
    public var origin: String
    public var status: Status
    public var createdAt: Int64
    /// AppSettings as JSON (as the domain last wrote them).
    public var settings: String

    /// The previous secret, if it is still accepted at `now`.
    public func previousSecret(at now: Int64) -> String? {
        guard let previousSecret, let until = previousSecretExpiresAt, now < until else { return nil }
        return previousSecret
    }
}

/// A refused operator change; nothing was changed. Rendered with the error table's codes by the
/// gateway and the command line.
public enum OperatorAppsError: Error, Equatable, CustomStringConvertible {
    case unknownApp(String)
    case exists(String)
    /// The app is already being removed (it is deleted when its node next starts).
    case removing(String)
    case invalid(field: String, message: String)

    public var description: String {
        switch self {
        case .unknownApp(let key): return "no app with key '\(key)'"
        case .exists(let key): return "an app with key '\(key)' already exists"
        case .removing(let key): return "app '\(key)' is being removed (its data is deleted when its node next starts)"
        case .invalid(_, let message): return message
        }
    }
}

/// Apps managed without SQL (OP-2), on the store's `app` table. Every change raises the apps
/// generation (`meta.appsGeneration`) in its own transaction; a running node polls it and applies
/// what changed (`AppsWatcher` in the gateway), so a change made by `roomcast apps` in another
/// process reaches a running node too.
public enum OperatorApps {
    static let generationKey = "appsGeneration"

    /// App keys the operator gives: 1–64 of `A–Z a–z 0–9 . _ -` (they travel in URLs, headers and
    /// the `--app KEY:SECRET` and comma-separated lists).
    public static let maxKeyBytes = 64
    /// A secret the operator gives: 16–128 visible ASCII characters. Generated ones are 48 hex
    /// digits (24 random bytes).
    public static let secretBytes = 16...128

    public static func validateKey(_ key: String) throws(OperatorAppsError) {
        guard !key.isEmpty, key.utf8.count <= maxKeyBytes,
              key.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2E || $0 == 0x5F || $0 == 0x2D }) else {
            throw .invalid(field: "key", message: "an app key is 1 to \(maxKeyBytes) characters of A-Z, a-z, 0-9, '.', '_' and '-'")
        }
    }

    public static func validateSecret(_ secret: String) throws(OperatorAppsError) {
        guard secretBytes.contains(secret.utf8.count), secret.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .invalid(field: "secret", message: "a secret is \(secretBytes.lowerBound) to \(secretBytes.upperBound) visible ASCII characters")
        }
    }

    /// The apps generation: raised by every operator change.
    public static func generation(_ db: Database) throws -> Int64 {
        Int64(try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [generationKey]) ?? "0") ?? 0
    }

    private static func bump(_ db: Database) throws {
        try db.execute(sql: """
            INSERT INTO meta (key, value) VALUES (?, '1')
            ON CONFLICT(key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)
            """, arguments: [generationKey])
    }

    public static func list(_ db: Database) throws -> [OperatorApp] {
        try Row.fetchAll(db, sql: """
            SELECT key, secret, previousSecret, previousSecretExpiresAt, origin, status, createdAt, settings
            FROM app ORDER BY createdAt, key
            """).map(app)
    }

    public static func find(_ db: Database, _ key: String) throws -> OperatorApp? {
        try Row.fetchOne(db, sql: """
            SELECT key, secret, previousSecret, previousSecretExpiresAt, origin, status, createdAt, settings
            FROM app WHERE key = ?
            """, arguments: [key]).map(app)
    }

    private static func app(_ row: Row) -> OperatorApp {
        OperatorApp(key: row["key"], secret: row["secret"], previousSecret: row["previousSecret"], previousSecretExpiresAt: row["previousSecretExpiresAt"],
                    origin: row["origin"], status: OperatorApp.Status(rawValue: row["status"]) ?? .disabled, createdAt: row["createdAt"],
                    settings: row["settings"])
    }

    private static func existing(_ db: Database, _ key: String) throws -> OperatorApp {
        guard let app = try find(db, key) else { throw OperatorAppsError.unknownApp(key) }
        if app.status == .removing { throw OperatorAppsError.removing(key) }
        return app
    }

    /// A new app with default settings.
    public static func add(_ db: Database, key: String, secret: String, now: Int64) throws -> OperatorApp {
        try validateKey(key)
        try validateSecret(secret)
        if let app = try find(db, key) {
            throw app.status == .removing ? OperatorAppsError.removing(key) : OperatorAppsError.exists(key)
        }
        let settings = String(decoding: try JSONEncoder().encode(AppSettings()), as: UTF8.self)
        try db.execute(sql: "INSERT INTO app (key, secret, settings, createdAt, origin, allowedOrigins) VALUES (?, ?, ?, ?, 'api', '')",
                       arguments: [key, secret, settings, now])
        try bump(db)
        return try existing(db, key)
    }

    /// Gives the app `secret`; the one it had stays valid for `graceMilliseconds` (a previous one
    /// still in its grace is replaced: at most two secrets are valid at once).
    public static func rotateSecret(_ db: Database, key: String, secret: String, now: Int64, graceMilliseconds: Int64) throws -> OperatorApp {
        try validateSecret(secret)
        let app = try existing(db, key)
        guard secret != app.secret else { throw OperatorAppsError.invalid(field: "secret", message: "the new secret is the app's current one") }
        try db.execute(sql: "UPDATE app SET secret = ?, previousSecret = ?, previousSecretExpiresAt = ? WHERE key = ?",
                       arguments: [secret, app.secret, now + graceMilliseconds, key])
        try bump(db)
        return try existing(db, key)
    }

    /// Disables (`active: false`) or enables an app. Setting the status it has changes nothing.
    public static func setActive(_ db: Database, key: String, _ active: Bool) throws -> OperatorApp {
        let app = try existing(db, key)
        let status: OperatorApp.Status = active ? .active : .disabled
        guard app.status != status else { return app }
        try db.execute(sql: "UPDATE app SET status = ? WHERE key = ?", arguments: [status.rawValue, key])
        try bump(db)
        return try existing(db, key)
    }

    public enum Removal: String, Sendable {
        /// The app and all its data are gone.
        case deleted
        /// Its node is running: the app is refused from now on, and deleted with its data when
        /// the node next starts (the node holds its rooms and sessions in memory).
        case atNextStart
    }

    /// Removes an app and everything it holds. With its node running (`nodeRunning`), the app is
    /// marked and deleted when the node next starts.
    public static func remove(_ db: Database, key: String, nodeRunning: Bool) throws -> Removal {
        _ = try existing(db, key)
        if nodeRunning {
            try db.execute(sql: "UPDATE app SET status = 'removing' WHERE key = ?", arguments: [key])
            try bump(db)
            return .atNextStart
        }
        try deleteApp(db, key)
        try bump(db)
        return .deleted
    }

    /// Deletes the apps marked `removing` (at a node's start, before anything reads them).
    static func purgeRemoved(_ writer: any DatabaseWriter) throws {
        try writer.write { db in
            let keys = try String.fetchAll(db, sql: "SELECT key FROM app WHERE status = 'removing'")
            for key in keys { try deleteApp(db, key) }
            if !keys.isEmpty { try bump(db) }
        }
    }

    /// The app's row and every row of its data. Rooms, members, moderation, attributes, queues,
    /// messages, groups, conversations and webhook endpoints (with their deliveries) go with the
    /// app row through their foreign keys; the tables without one are cleared by app.
    static func deleteApp(_ db: Database, _ key: String) throws {
        for table in ["roomEvent", "requestNonce", "onlineUser", "idempotencyKey", "webhookMessage"] {
            try db.execute(sql: "DELETE FROM \(table) WHERE app = ?", arguments: [key])
        }
        try db.execute(sql: "DELETE FROM app WHERE key = ?", arguments: [key])
    }
}
