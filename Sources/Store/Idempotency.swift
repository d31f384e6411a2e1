import Chat
import Foundation
import GRDB

/// PX-2: the first answer to a request sent with an `Idempotency-Key`, kept 24 hours.
public struct StoredAnswer: Sendable, Equatable {
    /// SHA-256 of the request's method, target and body: the same key with another request is refused.
    public var fingerprint: String
    public var status: Int
    public var contentType: String
    public var body: [UInt8]
    public var at: Int64

    public init(fingerprint: String, status: Int, contentType: String, body: [UInt8], at: Int64) {
        self.fingerprint = fingerprint
        self.status = status
        self.contentType = contentType
        self.body = body
        self.at = at
    }
}

extension Store {
    /// How long an answer is replayed.
    public static let idempotencyRetentionMilliseconds: Int64 = Limits.idempotencyRetentionMilliseconds

    /// The answer kept for `key` of `app`, if it is younger than the retention.
    public func storedAnswer(app: String, key: String, now: Int64) throws -> StoredAnswer? {
        try database.read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT fingerprint, status, contentType, body, at FROM idempotencyKey WHERE app = ? AND key = ? AND at >= ?",
                                             arguments: [app, key, now - Self.idempotencyRetentionMilliseconds]) else { return nil }
            let body: Data = row["body"]
            return StoredAnswer(fingerprint: row["fingerprint"], status: row["status"], contentType: row["contentType"], body: Array(body), at: row["at"])
        }
    }

    /// Drops the app's oldest answers beyond the newest `keep` (a bound on what one app can make
    /// the store hold, whatever its rate).
    public static func trimAnswers(app: String, keep: Int, _ tx: Transaction) throws {
        try tx.database.execute(sql: """
            DELETE FROM idempotencyKey WHERE app = ? AND at < (
                SELECT at FROM idempotencyKey WHERE app = ? ORDER BY at DESC LIMIT 1 OFFSET ?)
            """, arguments: [app, app, max(0, keep - 1)])
    }

    /// Keeps an answer (in the caller's transaction) and drops the expired ones.
    public static func keepAnswer(app: String, key: String, _ a: StoredAnswer, _ tx: Transaction) throws {
        try tx.database.execute(sql: "INSERT OR REPLACE INTO idempotencyKey (app, key, fingerprint, status, contentType, body, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                                arguments: [app, key, a.fingerprint, a.status, a.contentType, Data(a.body), a.at])
        try tx.database.execute(sql: "DELETE FROM idempotencyKey WHERE at < ?", arguments: [a.at - idempotencyRetentionMilliseconds])
    }

    /// Cluster mode: drops the answers of keys the cluster's ledger forgot (past its bound).
    public static func forgetAnswers(_ keys: [(app: String, key: String)], _ tx: Transaction) throws {
        for k in keys {
            try tx.database.execute(sql: "DELETE FROM idempotencyKey WHERE app = ? AND key = ?", arguments: [k.app, k.key])
        }
    }
}
