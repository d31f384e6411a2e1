import Chat
import Foundation
import GRDB
import Store
import Testing

/// MO-8 on disk: the audit trail's entries are written with the commands that made them, the
/// store keeps the newest `Limits.auditEntriesPerApp` of each app, and a restart restores them
/// (numbering goes on after the newest).
@Suite struct AuditStoreTests {
    let now: Int64 = 1_800_000_000_000

    @Test("MO-8: entries are written and restored per app; the store drops the oldest past the bound; ids go on after a restart")
    func writtenBoundedAndRestored() throws {
        let store = try Store(inMemory: logger)
        try store.upsertApp(key: "a", secret: "s", origin: "config", settings: AppSettings(), now: now)
        try store.upsertApp(key: "b", secret: "s", origin: "config", settings: AppSettings(), now: now)
        store.start()
        defer { store.stop() }
        let domain = try restored(store, now: now)
        let extra = 3
        var t = now
        for i in 0..<(Limits.auditEntriesPerApp + extra) {
            t += 1
            let out = domain.apply(.globalMute(app: "a", ["u\(i)"], minutes: 1, rc: nil), now: t)
            store.submit(Store.Commit(mutations: out.mutations, onDurable: {}))
        }
        let other = domain.apply(Command.kick(app: "b", roomId: "nope", target: "x", .server, notifyExt: "").via(.nim), now: t)
        if case .success = other.reply { Issue.record("kick in a missing room succeeded") }
        let b = domain.apply(Command.setRoomMuted(app: "b", roomId: "nope", true, .server, rc: nil, nim: nil), now: t)
        if case .success = b.reply { Issue.record("room mute in a missing room succeeded") }
        let words = domain.apply(Command.editSensitiveWords(app: "b", add: [SensitiveWord(word: "x")], remove: []).via(.rongCloud), now: t)
        commitAndWait(store, words.mutations)

        let rows = try store.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM auditEntry WHERE app = 'a'") }
        #expect(rows == Limits.auditEntriesPerApp)
        let back = try restored(store, now: t)
        for app in ["a", "b"] {
            for before in [nil, Int64(500)] {
                let q = Query.audit(app: app, roomId: nil, before: before, limit: Limits.maxAuditPage)
                #expect(back.query(q, now: t) == domain.query(q, now: t), "\(app) before \(String(describing: before))")
            }
        }
        guard case .success(.audit(let bEntries, _)) = back.query(.audit(app: "b", roomId: nil, before: nil, limit: 10), now: t) else {
            Issue.record("no page")
            return
        }
        #expect(bEntries.map(\.surface) == [.rongCloud] && bEntries.map(\.action) == [.sensitiveWordAdd] && bEntries.first?.id == 1)
        let next = back.apply(.globalUnmute(app: "a", ["u0"], rc: nil), now: t + 1)
        guard case .appendAudit(_, let e)? = next.mutations.last else { Issue.record("no entry"); return }
        #expect(e.id == Int64(Limits.auditEntriesPerApp + extra + 1))
    }
}
