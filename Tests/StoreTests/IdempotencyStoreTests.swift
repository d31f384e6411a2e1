import Chat
import Foundation
import GRDB
import Logging
@testable import Store
import Testing

/// PX-2 in the store: answers kept, read back within 24 h, expired and trimmed to a bound per app.
@Suite("Idempotency answers in the store")
struct IdempotencyStoreTests {
    @Test func keptReadExpiredAndTrimmed() throws {
        let store = try Store(inMemory: logger)
        store.start()
        defer { store.stop() }
        let day = Store.idempotencyRetentionMilliseconds
        @Sendable func answer(_ at: Int64) -> StoredAnswer { StoredAnswer(fingerprint: "f\(at)", status: 201, contentType: "application/json", body: Array("{}".utf8), at: at) }
        commitAndWait(store, []) { tx in
            for i in 0..<5 { try Store.keepAnswer(app: "a", key: "k\(i)", answer(1_000 + Int64(i)), tx) }
            try Store.keepAnswer(app: "b", key: "k0", answer(1_000), tx)
        }
        #expect(try store.storedAnswer(app: "a", key: "k1", now: 2_000) == answer(1_001))
        #expect(try store.storedAnswer(app: "a", key: "k1", now: 1_001 + day + 1) == nil)  // older than 24 h
        #expect(try store.storedAnswer(app: "c", key: "k1", now: 2_000) == nil)
        // Trim to the newest 3 of app a; app b is untouched.
        commitAndWait(store, []) { tx in try Store.trimAnswers(app: "a", keep: 3, tx) }
        let left = try store.database.read { db in try String.fetchAll(db, sql: "SELECT key FROM idempotencyKey WHERE app = 'a' ORDER BY key") }
        #expect(left == ["k2", "k3", "k4"])
        #expect(try store.storedAnswer(app: "b", key: "k0", now: 2_000) != nil)
        // A new answer drops those past the retention.
        commitAndWait(store, []) { tx in try Store.keepAnswer(app: "b", key: "k9", answer(1_000 + day + 10), tx) }
        let all = try store.database.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM idempotencyKey") }
        #expect(all == 1)
    }
}
