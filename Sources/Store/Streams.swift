import Chat
import Foundation
import GRDB

/// One event of a room's ordered stream, kept so that a client can resume across a restart of the
/// server (BX-1): the room's epoch and offset, when it happened, who it does not reach, and its
/// JSON payload as sent.
public struct StoredRoomEvent: Sendable, Equatable {
    public var room: RoomKey
    public var epoch: String
    public var offset: Int64
    public var at: Int64
    /// The users it does not reach (empty: every member).
    public var exceptUsers: [String]
    public var payload: [UInt8]
    /// AU-1, AU-2: the members it was addressed to (nil: the room, but `exceptUsers`).
    public var addressed: Addressed?

    /// Whom a targeted event reaches, as kept for resuming clients.
    public enum Addressed: Equatable, Sendable, Codable {
        case users([String])
        case tags(TagExpression)
    }

    public init(room: RoomKey, epoch: String, offset: Int64, at: Int64, exceptUsers: [String], payload: [UInt8], addressed: Addressed? = nil) {
        self.addressed = addressed
        self.room = room
        self.epoch = epoch
        self.offset = offset
        self.at = at
        self.exceptUsers = exceptUsers
        self.payload = payload
    }
}

extension Store {
    /// Writes room-stream events in the transaction of the outcome that caused them.
    public static func append(_ events: [StoredRoomEvent], _ tx: Transaction) throws {
        guard !events.isEmpty else { return }
        // Prepared once per connection (one event per message: a hot write).
        let statement = try tx.database.cachedStatement(
            sql: #"INSERT OR REPLACE INTO roomEvent (app, roomId, epoch, "offset", at, exceptUsers, payload, addressed) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"#)
        for e in events {
            let addressed = try e.addressed.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) } ?? ""
            try statement.execute(arguments: [e.room.app, e.room.roomId, e.epoch, e.offset, e.at, e.exceptUsers.joined(separator: "\n"), Data(e.payload), addressed])
        }
    }

    /// MO-1: replaces a kept event's payload (a recalled message's tombstone), in the transaction
    /// of the recall; an event no longer kept is left gone.
    public static func redact(room: RoomKey, epoch: String, offset: Int64, payload: [UInt8], _ tx: Transaction) throws {
        try tx.database.execute(sql: #"UPDATE roomEvent SET payload = ? WHERE app = ? AND roomId = ? AND epoch = ? AND "offset" = ?"#,
                                arguments: [Data(payload), room.app, room.roomId, epoch, offset])
    }

    /// Drops events older than `before` and all but the newest `keepPerRoom` of each room's
    /// epoch, but always keeps each room's newest event: it holds the offset the stream continues
    /// from after a restart.
    public static func trimRoomEvents(before: Int64, keepPerRoom: Int, _ tx: Transaction) throws {
        try tx.database.execute(sql: #"""
            DELETE FROM roomEvent WHERE (app, roomId, epoch, "offset") IN (
                SELECT app, roomId, epoch, "offset" FROM (
                    SELECT app, roomId, epoch, "offset", at,
                           ROW_NUMBER() OVER (PARTITION BY app, roomId, epoch ORDER BY "offset" DESC) AS rank
                    FROM roomEvent
                ) WHERE rank > 1 AND (rank > ? OR at < ?)
            )
            """#, arguments: [keepPerRoom, before])
    }

    /// Forgets the streams of rooms that no longer exist, or of their epochs before the current
    /// one (a recreated room starts a new epoch).
    public static func forgetRoomEvents(_ rooms: [(room: RoomKey, currentEpoch: String?)], _ tx: Transaction) throws {
        for (room, current) in rooms {
            try tx.database.execute(sql: "DELETE FROM roomEvent WHERE app = ? AND roomId = ? AND epoch <> ?",
                                    arguments: [room.app, room.roomId, current ?? ""])
        }
    }

    /// The kept events since `since`, each room's in offset order.
    public func roomEvents(since: Int64) throws -> [StoredRoomEvent] {
        try database.read { db in
            try Row.fetchAll(db, sql: #"SELECT app, roomId, epoch, "offset", at, exceptUsers, payload, addressed FROM roomEvent WHERE at >= ? ORDER BY app, roomId, epoch, "offset""#,
                             arguments: [since]).map { row in
                let except: String = row["exceptUsers"]
                let payload: Data = row["payload"]
                let addressed: String = row["addressed"]
                return StoredRoomEvent(room: RoomKey(app: row["app"], roomId: row["roomId"]), epoch: row["epoch"], offset: row["offset"],
                                       at: row["at"], exceptUsers: except.isEmpty ? [] : except.split(separator: "\n").map(String.init),
                                       payload: Array(payload),
                                       addressed: addressed.isEmpty ? nil : try JSONDecoder().decode(StoredRoomEvent.Addressed.self, from: Data(addressed.utf8)))
            }
        }
    }

    /// The newest (epoch, offset) of each room's stream, so offsets continue across a restart.
    public func lastOffsets() throws -> [RoomKey: (epoch: String, offset: Int64)] {
        try database.read { db in
            var out: [RoomKey: (epoch: String, offset: Int64, at: Int64)] = [:]
            let rows = try Row.fetchAll(db, sql: #"SELECT app, roomId, epoch, MAX("offset") AS o, MAX(at) AS at FROM roomEvent GROUP BY app, roomId, epoch"#)
            for row in rows {
                let key = RoomKey(app: row["app"], roomId: row["roomId"])
                let at: Int64 = row["at"]
                if let seen = out[key], seen.at >= at { continue }
                out[key] = (row["epoch"], row["o"], at)
            }
            return out.mapValues { ($0.epoch, $0.offset) }
        }
    }

    /// This deployment's stream id: made once (from `make`) and kept with the data, so resume
    /// positions stay valid across restarts.
    public func streamID(orCreate make: () -> String) throws -> String {
        try database.write { db in
            if let v = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'stream'") { return v }
            let v = make()
            try db.execute(sql: "INSERT INTO meta (key, value) VALUES ('stream', ?)", arguments: [v])
            return v
        }
    }

    // MARK: Request nonces (replay protection across restarts)

    /// Records a signed request's nonce (its own small commit; a command signed with it is
    /// submitted after it and so is never durable before it).
    public func recordNonce(app: String, nonce: String, at: Int64) {
        submit(Commit(mutations: [], extra: { tx in
            try tx.database.cachedStatement(sql: "INSERT OR REPLACE INTO requestNonce (app, nonce, at) VALUES (?, ?, ?)")
                .execute(arguments: [app, nonce, at])
        }, onDurable: {}))
    }

    /// Nonces used since `since`.
    public func nonces(since: Int64) throws -> [(app: String, nonce: String, at: Int64)] {
        try database.read { db in
            try Row.fetchAll(db, sql: "SELECT app, nonce, at FROM requestNonce WHERE at >= ?", arguments: [since]).map { ($0["app"], $0["nonce"], $0["at"]) }
        }
    }

    public static func trimNonces(before: Int64, _ tx: Transaction) throws {
        try tx.database.execute(sql: "DELETE FROM requestNonce WHERE at < ?", arguments: [before])
    }
}

// MARK: History beyond the in-memory window

extension Store {
    /// NIM-8 history from disk: the messages of a room since `oldest`, newest first strictly
    /// before `start` (0: from now) or oldest first strictly after it, of the given kinds.
    /// At most this many stored messages are read to fill one page of a filtered history (AU-1,
    /// AU-2: a member reads only what was addressed to it), so a page may hold fewer than asked.
    public static let maxFilteredHistoryScan = 500

    public func history(app: String, roomId: String, start: Int64, limit: Int, descending: Bool, kinds: [ChatMessage.Kind],
                        oldest: Int64, filter: ResolvedHistoryFilter = ResolvedHistoryFilter()) throws -> [ChatMessage] {
        var sql = "SELECT * FROM message WHERE app = ? AND roomId = ? AND time >= ?"
        var args: StatementArguments = [app, roomId, oldest]
        if descending {
            if start > 0 {
                sql += " AND time < ?"
                args += [start]
            }
        } else {
            sql += " AND time > ?"
            args += [start]
        }
        if !kinds.isEmpty {
            sql += " AND kind IN (" + kinds.map { _ in "?" }.joined(separator: ", ") + ")"
            args += StatementArguments(kinds.map(\.rawValue))
        }
        // AU-1: messages addressed to any of the tags name them (the tag column lists them).
        if !filter.tags.isEmpty {
            sql += " AND (" + filter.tags.map { _ in "instr(char(10) || tagNames || char(10), char(10) || ? || char(10)) > 0" }.joined(separator: " OR ") + ")"
            args += StatementArguments(filter.tags)
        }
        // AU-2: a member's page leaves out, in SQL, what was listed for other users (the tag
        // expressions are matched below, on the rows read).
        if let user = filter.viewerUser {
            sql += " AND (targets = '' OR sender = ? OR instr(char(10) || targets || char(10), char(10) || ? || char(10)) > 0)"
            args += [user, user]
        }
        sql += descending ? " ORDER BY time DESC, id DESC" : " ORDER BY time, id"
        sql += " LIMIT ?"
        args += [filter.isEmpty ? limit : max(limit, Self.maxFilteredHistoryScan)]
        let query = sql
        let arguments = args
        let rows = try database.read { db in try MessageRow.fetchAll(db, sql: query, arguments: arguments).map(\.message) }
        return filter.isEmpty ? rows : Array(rows.filter(filter.admits).prefix(limit))
    }

    /// Keeps at most `perRoom` messages in each room of `app` and `perApp` in all of them (the
    /// oldest go first).
    public static func trimMessages(app: String, perRoom: Int, perApp: Int, _ tx: Transaction) throws {
        try tx.database.execute(sql: """
            DELETE FROM message WHERE (app, roomId, id) IN (
                SELECT app, roomId, id FROM (
                    SELECT app, roomId, id, ROW_NUMBER() OVER (PARTITION BY roomId ORDER BY time DESC, id DESC) AS rank
                    FROM message WHERE app = ?
                ) WHERE rank > ?
            )
            """, arguments: [app, perRoom])
        try tx.database.execute(sql: """
            DELETE FROM message WHERE (app, roomId, id) IN (
                SELECT app, roomId, id FROM message WHERE app = ? ORDER BY time DESC, id DESC LIMIT -1 OFFSET ?
            )
            """, arguments: [app, perApp])
    }
}
