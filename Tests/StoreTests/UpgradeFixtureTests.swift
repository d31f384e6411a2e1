import Chat
import Foundation
import GRDB
import Store
import Testing
import TestKit

/// OP-3: data directories written by earlier builds — made by those builds themselves
/// (scripts/make-upgrade-fixture.sh COMMIT) and committed — open with this build, migrate to its
/// schema version, and hold the scenario each was driven through.
@Suite("Upgrades from earlier builds' data (OP-3)")
struct UpgradeFixtureTests {
    @Test func thereAreFixturesFromTwoEarlierCommits() {
        let fixtures = UpgradeFixtures.all
        #expect(Set(fixtures.map(\.manifest.commit)).count >= 2, "found \(fixtures.map(\.manifest.commit)) in \(UpgradeFixtures.directory)")
        for f in fixtures {
            #expect(f.manifest.madeBy == "scripts/make-upgrade-fixture.sh")
            #expect(!f.manifest.migrations.isEmpty && Set(f.manifest.migrations).isSubset(of: Set(SchemaVersion.known)),
                    "\(f.manifest.commit): written by an earlier build, with migrations this one knows")
        }
    }

    @Test(arguments: UpgradeFixtures.all.map(\.manifest.commit))
    func anEarlierBuildsDirectoryOpensMigratesAndHoldsItsData(commit: String) throws {
        let fixture = try #require(UpgradeFixtures.all.first { $0.manifest.commit == commit })
        let m = fixture.manifest
        let dir = try scratchDirectory("upgrade-\(commit)")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = DataDirectory.databasePath(dir)
        try FileManager.default.copyItem(atPath: fixture.database, toPath: path)

        // As written: the earlier build's schema version.
        let before = try StoreFile(directory: dir, create: false, migrate: false).state
        #expect(before.applied.sorted() == m.migrations.sorted())
        #expect(!before.isNewer)

        let store = try Store(path: path, durability: .normal, logger: logger)
        let after = try store.database.read { try SchemaVersion.state($0) }
        #expect(after.isCurrent && after.version == SchemaVersion.current)

        let rows = try store.database.read { db in
            (apps: try String.fetchAll(db, sql: "SELECT key || ':' || secret || ':' || status FROM app"),
             rooms: try Row.fetchAll(db, sql: "SELECT roomId, name FROM room WHERE app = ?", arguments: [m.app.key]),
             roles: try String.fetchAll(db, sql: "SELECT roomId || '/' || userId || '/' || role FROM member WHERE app = ? AND role <> 'none'", arguments: [m.app.key]),
             messages: try String.fetchAll(db, sql: "SELECT roomId || '/' || sender || '/' || content FROM message WHERE app = ? ORDER BY time, id",
                                           arguments: [m.app.key]),
             permanent: try String.fetchAll(db, sql: "SELECT roomId || '/' || userId FROM permanentMute WHERE app = ?", arguments: [m.app.key]),
             temporary: try Row.fetchAll(db, sql: "SELECT roomId, userId, until FROM tempMute WHERE app = ?", arguments: [m.app.key]),
             global: try String.fetchAll(db, sql: "SELECT userId FROM globalMute WHERE app = ?", arguments: [m.app.key]),
             hooks: try String.fetchAll(db, sql: "SELECT url FROM webhookEndpoint WHERE app = ?", arguments: [m.app.key]))
        }
        #expect(rows.apps == ["\(m.app.key):\(m.app.secret):active"], "the app, its secret, and the status migration v8 added")
        #expect(Dictionary(uniqueKeysWithValues: rows.rooms.map { ($0["roomId"] as String, $0["name"] as String) }) == m.rooms)
        #expect(Set(rows.roles) == Set(m.roles.map { "\($0.room)/\($0.user)/\($0.role)" }))
        #expect(rows.messages == m.messages.map { "\($0.room)/\($0.sender)/\($0.content)" })
        #expect(Set(rows.permanent) == Set(m.permanentMutes.map { "\($0.room ?? "")/\($0.user)" }))
        #expect(Set(rows.temporary.map { "\($0["roomId"] as String)/\($0["userId"] as String)" }) == Set(m.temporaryMutes.map { "\($0.room ?? "")/\($0.user)" }))
        let made = Int64((ISO8601DateFormatter().date(from: m.commitDate)?.timeIntervalSince1970 ?? 0) * 1000)
        #expect(rows.temporary.allSatisfy { ($0["until"] as Int64) > made }, "temporary mutes keep their end")
        #expect(Set(rows.global) == Set(m.globalMutes.map(\.user)))
        #expect(rows.hooks == m.webhookEndpoints)

        // The domain a node builds from it at start holds the same.
        let domain = try restored(store, now: 1_800_000_000_000)
        for (room, name) in m.rooms {
            guard case .success(.room(let info)) = domain.query(.room(app: m.app.key, roomId: room), now: 1_800_000_000_000) else {
                Issue.record("room \(room) is not in the restored domain")
                continue
            }
            #expect(info.name == name)
        }
    }
}
