import Chat
import Foundation
import GRDB

/// Rows of the webhook tables (schema v3) and the statements the service runs. Writes go through
/// the store's writer (in the same transaction as the change, for new messages); reads use `Store.database`.
enum WebhookDatabase {
    struct EndpointRow: Codable, FetchableRecord, PersistableRecord {
        static let databaseTableName = "webhookEndpoint"
        var id: String
        var app: String
        var url: String
        var secret: String
        var previousSecret: String?
        var previousSecretExpiresAt: Int64?
        var events: String
        var format: String
        var allowPrivateNetwork: Bool
        var enabled: Bool
        var disabledReason: String
        var origin: String
        var createdAt: Int64

        init(_ e: WebhookEndpoint) {
            id = e.id
            app = e.app
            url = e.url
            secret = e.secret
            previousSecret = e.previousSecret
            previousSecretExpiresAt = e.previousSecretExpiresAt
            events = e.events.map(\.rawValue).joined(separator: ",")
            format = e.format.rawValue
            allowPrivateNetwork = e.allowPrivateNetwork
            enabled = e.enabled
            disabledReason = e.disabledReason
            origin = e.origin
            createdAt = e.createdAt
        }

        var endpoint: WebhookEndpoint {
            WebhookEndpoint(id: id, app: app, url: url, secret: secret, previousSecret: previousSecret, previousSecretExpiresAt: previousSecretExpiresAt,
                            events: events.split(separator: ",").compactMap { WebhookEventType(rawValue: String($0)) },
                            format: WebhookFormat(rawValue: format) ?? .standard, allowPrivateNetwork: allowPrivateNetwork, enabled: enabled,
                            disabledReason: disabledReason, origin: origin, createdAt: createdAt)
        }
    }

    struct MessageRow: Codable, FetchableRecord, PersistableRecord {
        static let databaseTableName = "webhookMessage"
        var id: String
        var app: String
        var type: String
        var time: Int64
        var roomId: String
        var userIds: String
        var cause: Int
        var details: String
        var sequence: Int64

        init(_ m: WebhookMessage) {
            id = m.id
            app = m.app
            type = m.type.rawValue
            time = m.time
            roomId = m.roomId
            userIds = m.userIds.joined(separator: "\n")
            cause = m.cause
            // Keys sorted: the same message is the same row on every node of a cluster (CL-6).
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            let data = (try? encoder.encode(m.details)) ?? Data("{}".utf8)
            details = String(decoding: data, as: UTF8.self)
            sequence = m.sequence
        }

        var message: WebhookMessage? {
            guard let t = WebhookEventType(rawValue: type) else { return nil }
            let d = (try? JSONDecoder().decode([String: String].self, from: Data(details.utf8))) ?? [:]
            return WebhookMessage(id: id, app: app, type: t, time: time, roomId: roomId,
                                  userIds: userIds.isEmpty ? [] : userIds.split(separator: "\n", omittingEmptySubsequences: false).map(String.init),
                                  cause: cause, details: d, sequence: sequence)
        }
    }

    struct DeliveryRow: Codable, FetchableRecord, PersistableRecord {
        static let databaseTableName = "webhookDelivery"
        var endpointId: String
        var messageId: String
        var sequence: Int64
        var status: String
        var attempts: Int
        var nextAttemptAt: Int64
        var lastStatus: Int
        var lastError: String
        var updatedAt: Int64
    }

    struct AttemptRow: Codable, FetchableRecord, PersistableRecord {
        static let databaseTableName = "webhookAttempt"
        var endpointId: String
        var messageId: String
        var attempt: Int
        var time: Int64
        var status: Int
        var error: String
        var durationMs: Int64
    }

    // MARK: Writes (run inside the store's transactions)

    static func save(_ e: WebhookEndpoint, _ db: Database) throws { try EndpointRow(e).save(db) }

    static func deleteEndpoint(_ id: String, _ db: Database) throws {
        try db.execute(sql: "DELETE FROM webhookEndpoint WHERE id = ?", arguments: [id])
    }

    // The hot statements (one per message, delivery and attempt) are prepared once per connection.

    static func insert(_ m: WebhookMessage, _ db: Database) throws {
        let row = MessageRow(m)
        try db.cachedStatement(sql: """
            INSERT OR IGNORE INTO webhookMessage (id, app, type, time, roomId, userIds, cause, details, sequence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [row.id, row.app, row.type, row.time, row.roomId, row.userIds, row.cause, row.details, row.sequence])
    }

    /// A new (or replayed) delivery: pending, no attempts yet, due at `at`; `owner` is the cluster's
    /// node run that sends it (0 on a single node).
    static func queue(endpointId: String, _ m: WebhookMessage, at: Int64, owner: UInt64 = 0, _ db: Database) throws {
        try db.cachedStatement(sql: """
            INSERT OR REPLACE INTO webhookDelivery (endpointId, messageId, sequence, status, attempts, nextAttemptAt, lastStatus, lastError, updatedAt, owner)
            VALUES (?, ?, ?, 'pending', 0, ?, 0, '', ?, ?)
            """).execute(arguments: [endpointId, m.id, m.sequence, at, at, Int64(bitPattern: owner)])
    }

    /// A delivery's new state. A retry (still pending) never overwrites an end: in a cluster the
    /// delivery's outcome may come through the log from another run (CL-6) before this run's
    /// delivery thread writes its own failed attempt.
    static func update(endpointId: String, messageId: String, status: DeliveryStatus, attempts: Int, nextAttemptAt: Int64, lastStatus: Int,
                       lastError: String, now: Int64, _ db: Database) throws {
        try db.cachedStatement(sql: """
            UPDATE webhookDelivery SET status = ?, attempts = ?, nextAttemptAt = ?, lastStatus = ?, lastError = ?, updatedAt = ?
            WHERE endpointId = ? AND messageId = ? AND (? <> 'pending' OR status = 'pending')
            """).execute(arguments: [status.rawValue, attempts, nextAttemptAt, lastStatus, lastError, now, endpointId, messageId, status.rawValue])
    }

    /// An attempt of a delivery, if the delivery is still there (an endpoint deleted while an
    /// attempt was in flight took its deliveries with it: the attempt is not recorded, and the
    /// batch it is written in does not fail).
    static func record(_ a: DeliveryAttempt, endpointId: String, messageId: String, _ db: Database) throws {
        try db.cachedStatement(sql: """
            INSERT INTO webhookAttempt (endpointId, messageId, attempt, time, status, error, durationMs)
            SELECT ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM webhookDelivery WHERE endpointId = ? AND messageId = ?)
            """).execute(arguments: [endpointId, messageId, a.attempt, a.time, a.status, a.error, a.durationMs, endpointId, messageId])
    }

    /// Forgets delivered and dead messages older than `before` (their deliveries and attempts go with them).
    static func prune(before: Int64, _ db: Database) throws {
        try db.execute(sql: """
            DELETE FROM webhookMessage WHERE time < ?
              AND NOT EXISTS (SELECT 1 FROM webhookDelivery d WHERE d.messageId = webhookMessage.id AND d.status = 'pending')
            """, arguments: [before])
    }

    // MARK: Reads

    static func endpoints(_ db: Database) throws -> [WebhookEndpoint] {
        try EndpointRow.order(Column("createdAt"), Column("id")).fetchAll(db).map(\.endpoint)
    }

    static func maxSequence(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT MAX(sequence) FROM webhookMessage") ?? 0
    }

    struct Pending {
        var endpointId: String
        var message: WebhookMessage
        var attempts: Int
        var nextAttemptAt: Int64
        /// When it was queued, on a node that never attempted it (a cluster's non-owner).
        var updatedAt: Int64
    }

    /// The pending deliveries `owner` sends, with their messages, oldest first (restart recovery).
    static func pending(owner: UInt64, _ db: Database) throws -> [Pending] {
        let rows = try Row.fetchAll(db, sql: """
            SELECT d.endpointId, d.attempts, d.nextAttemptAt, d.updatedAt, m.* FROM webhookDelivery d
            JOIN webhookMessage m ON m.id = d.messageId
            WHERE d.status = 'pending' AND d.owner = ? ORDER BY d.sequence
            """, arguments: [Int64(bitPattern: owner)])
        return rows.compactMap { row in
            guard let m = (try? MessageRow(row: row))?.message else { return nil }
            return Pending(endpointId: row["endpointId"], message: m, attempts: row["attempts"], nextAttemptAt: row["nextAttemptAt"],
                           updatedAt: row["updatedAt"])
        }
    }

    static func messages(app: String, ids: [String], _ db: Database) throws -> [WebhookMessage] {
        try MessageRow.filter(Column("app") == app && ids.contains(Column("id"))).order(Column("sequence")).fetchAll(db).compactMap(\.message)
    }

    static func messages(app: String, since: Int64, limit: Int, _ db: Database) throws -> [WebhookMessage] {
        try MessageRow.filter(Column("app") == app && Column("time") >= since).order(Column("sequence")).limit(limit).fetchAll(db)
            .compactMap(\.message)
    }

    /// The newest deliveries of an endpoint (optionally of one status), before `beforeSequence`,
    /// each with its attempts.
    static func deliveries(endpointId: String, status: DeliveryStatus?, beforeSequence: Int64?, limit: Int,
                           _ db: Database) throws -> [(DeliveryRecord, Int64)] {
        var sql = """
            SELECT d.*, m.type, m.time FROM webhookDelivery d JOIN webhookMessage m ON m.id = d.messageId
            WHERE d.endpointId = ?
            """
        var args: [any DatabaseValueConvertible] = [endpointId]
        if let status {
            sql += " AND d.status = ?"
            args.append(status.rawValue)
        }
        if let beforeSequence {
            sql += " AND d.sequence < ?"
            args.append(beforeSequence)
        }
        sql += " ORDER BY d.sequence DESC LIMIT ?"
        args.append(limit)
        let rows = try Row.fetchAll(db, sql: sql, arguments: StatementArguments(args))
        return try rows.compactMap { row -> (DeliveryRecord, Int64)? in
            guard let type = WebhookEventType(rawValue: row["type"]), let status = DeliveryStatus(rawValue: row["status"]) else { return nil }
            let messageId: String = row["messageId"]
            let history = try AttemptRow.filter(Column("endpointId") == endpointId && Column("messageId") == messageId)
                .order(Column("time"), Column("attempt")).fetchAll(db)
                .map { DeliveryAttempt(attempt: $0.attempt, time: $0.time, status: $0.status, error: $0.error, durationMs: $0.durationMs) }
            let record = DeliveryRecord(messageId: messageId, endpointId: endpointId, type: type, messageTime: row["time"], status: status,
                                        attempts: row["attempts"], nextAttemptAt: row["nextAttemptAt"], lastStatus: row["lastStatus"],
                                        lastError: row["lastError"], updatedAt: row["updatedAt"], history: history)
            return (record, row["sequence"])
        }
    }
}
