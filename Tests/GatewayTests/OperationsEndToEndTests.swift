import Crypto
import Foundation
import GRDB
import Synchronization
import Testing
import TestKit
import Wire
#if canImport(Glibc)
import Glibc
#endif

/// Runs `roomcast ARGS` (a subcommand) to its end: its exit status and what it printed.
func roomcastCommand(_ arguments: [String], timeout: Double = 60) throws -> (status: Int32?, output: String) {
    let process = try RunningProcess(path: try productPath("roomcast"), arguments: arguments)
    let (status, output) = process.finish(timeout: timeout)
    process.kill9()
    return (status, output)
}

func fileDigest(_ path: String) -> String? {
    guard let data = FileManager.default.contents(atPath: path) else { return nil }
    return SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
}

/// Waits until `condition` holds (at most `timeout` seconds).
func eventually(timeout: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        usleep(50_000)
    }
    return try condition()
}

/// Backup, restore, apps, upgrades and logs through the built `roomcast` (OP-1..OP-4): the few
/// things only a real process shows (a backup taken by another process while the node writes,
/// `kill -9` of a backup, a lock held by a running node, what the process prints).
@Suite("Operations end to end (OP-1..OP-4)")
struct OperationsEndToEndTests {
    // OP-1: a backup taken by `roomcast backup` while a node acknowledges writes holds, for each
    // writer, exactly a prefix of its acknowledged writes, and at least every write acknowledged
    // before the backup began; a restore into a live directory is refused (40913) and changes
    // nothing; restored into a new directory, a node started on it serves that data.
    @Test func backupUnderWriteLoadThenRestoreAndStart() async throws {
        try await offPool { () throws in
            let scratch = temporaryDirectory("roomcast-ops-backup")
            defer { try? FileManager.default.removeItem(atPath: scratch) }
            let g = try GatewayProcess(dataDirectory: scratch + "/data")
            defer { g.stop() }

            struct Ack: Sendable {
                let content: String
                let at: Date
            }
            // The writers send as fast as answers come, into rooms of their own: the room's message
            // budget (QS-2, 200 a second) is lifted, as this is about the backup, not admission.
            let admin = RESTClient(port: g.port, appKey: g.appKey, secret: g.secret)
            #expect(try admin.call("PATCH", "/v1/settings", ["roomMessagesPerSecond": 100_000]).status == 200)
            let writers = 3
            let perRoom = 40
            let stop = Atomic<Bool>(false)
            let acks = Mutex<[[Ack]]>(Array(repeating: [], count: writers))
            let failures = Mutex<[String]>([])
            var threads: [Thread] = []
            let (port, appKey, secret) = (g.port, g.appKey, g.secret)
            for w in 0..<writers {
                let t = Thread {
                    let rest = RESTClient(port: port, appKey: appKey, secret: secret)
                    var n = 0
                    while !stop.load(ordering: .relaxed) {
                        let room = "w\(w)-\(n / perRoom)"
                        do {
                            if n % perRoom == 0 {
                                let r = try rest.call("POST", "/v1/rooms", ["roomId": room])
                                guard r.status == 201 else { throw TestKitError.protocolError("create \(room): \(r.status)") }
                            }
                            let content = "w\(w)-m\(n)"
                            let r = try rest.call("POST", "/v1/rooms/\(room)/messages", ["content": content, "fromUserId": "writer\(w)"])
                            guard r.status == 201 else { throw TestKitError.protocolError("send \(content): \(r.status) \(r.text)") }
                            let ack = Ack(content: content, at: Date())
                            acks.withLock { $0[w].append(ack) }
                            n += 1
                        } catch {
                            failures.withLock { $0.append("\(error)") }
                            return
                        }
                    }
                }
                t.start()
                threads.append(t)
            }
            // Let the writers fill a few hundred pages first, then copy slowly, so the copy
            // overlaps many acknowledged writes.
            #expect(eventually(timeout: 30) { acks.withLock { $0.map(\.count).reduce(0, +) } >= 600 })
            let backupFile = scratch + "/backup.sqlite"
            let started = Date()
            let backup = try roomcastCommand(["backup", "--data-dir", g.dataDirectory, "--to", backupFile, "--pages-per-step", "4", "--pause-ms", "20"])
            let ended = Date()
            usleep(300_000)
            stop.store(true, ordering: .relaxed)
            while threads.contains(where: { !$0.isFinished }) { usleep(10_000) }
            #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
            #expect(backup.status == 0, "\(backup.output)")
            #expect(backup.output.contains("backup written: \(backupFile)") && backup.output.contains("integrity ok")
                    && backup.output.contains("while a node served"))
            #expect(!backup.output.contains("backing up:"), "no progress when standard error is not a terminal")
            let during = acks.withLock { $0.map { $0.filter { $0.at > started && $0.at < ended }.count } }
            #expect(during.reduce(0, +) > 20, "writes were acknowledged while the backup ran: \(during)")

            // A restore into the directory the node runs on is refused and changes nothing.
            let refused = try roomcastCommand(["restore", "--from", backupFile, "--data-dir", g.dataDirectory, "--force"])
            #expect(refused.status == 1 && refused.output.contains("error 40913"), "\(refused.output)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: g.dataDirectory).allSatisfy { !$0.hasPrefix("replaced-") })
            #expect(try g.rest().call("GET", "/v1/rooms/w0-0").status == 200)

            // Restored into a new directory and started: each writer's messages there are a
            // prefix of what it was acknowledged, and hold everything acknowledged before the
            // backup began.
            let restored = try roomcastCommand(["restore", "--from", backupFile, "--data-dir", scratch + "/restored"])
            #expect(restored.status == 0, "\(restored.output)")
            let h = try GatewayProcess(dataDirectory: scratch + "/restored")
            defer { h.stop() }
            let rest = h.rest()
            for (w, list) in acks.withLock({ $0 }).enumerated() {
                var found: [String] = []
                for k in 0... {
                    let r = try rest.call("GET", "/v1/rooms/w\(w)-\(k)/messages?order=asc&limit=100", headers: nil)
                    if r.status == 404 { break }
                    let contents = (r.json["messages"] as? [[String: Any]] ?? []).compactMap { $0.str("content") }
                    found += contents
                    if contents.count < perRoom { break }
                }
                let before = list.filter { $0.at < started }.count
                #expect(found == list.prefix(found.count).map(\.content), "writer \(w): not a prefix of its acknowledged writes")
                #expect(found.count >= before, "writer \(w): \(found.count) in the backup, \(before) acknowledged before it began")
                #expect(found.count < list.count, "writer \(w): writes acknowledged after the backup are not in it")
            }
        }
    }

    // OP-1: `kill -9` of a backup leaves no file under the backup's name (an older backup of that
    // name stays as it was), only its `.partial-PID` file.
    @Test func aKilledBackupLeavesNoFileThatLooksComplete() async throws {
        try await offPool { () throws in
            let scratch = temporaryDirectory("roomcast-ops-kill")
            defer { try? FileManager.default.removeItem(atPath: scratch) }
            let g = try GatewayProcess(dataDirectory: scratch + "/data")
            defer { g.stop() }
            let rest = g.rest()
            for r in 0..<10 {
                #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r\(r)"]).status == 201)
                for m in 0..<20 { _ = try rest.call("POST", "/v1/rooms/r\(r)/messages", ["content": String(repeating: "x", count: 400) + "\(m)"]) }
            }
            let file = scratch + "/nightly.sqlite"
            for older in [false, true] {
                if older { #expect(try roomcastCommand(["backup", "--data-dir", g.dataDirectory, "--to", file]).status == 0) }
                let digest = fileDigest(file)
                let slow = try RunningProcess(path: try productPath("roomcast"),
                                              arguments: ["backup", "--data-dir", g.dataDirectory, "--to", file, "--pages-per-step", "1", "--pause-ms", "100"])
                let partial = file + ".partial-\(slow.processIdentifier)"
                #expect(eventually(timeout: 20) { FileManager.default.fileExists(atPath: partial) })
                usleep(300_000)
                slow.kill9()
                #expect(slow.terminationStatus == SIGKILL)
                #expect(fileDigest(file) == digest, older ? "the older backup is untouched" : "no file under the backup's name")
                #expect(FileManager.default.fileExists(atPath: partial))
                try? FileManager.default.removeItem(atPath: partial)
            }
            // The older backup is still a good one.
            #expect(try roomcastCommand(["restore", "--from", file, "--data-dir", scratch + "/check"]).status == 0)
        }
    }

    // OP-2: `roomcast apps` on the directory of a running node: the node serves an added app, a
    // rotated secret (with the previous one for its grace), refuses a disabled one, within its
    // poll interval (2 s); bad input exits 1 with the code and changes nothing; a removal made
    // while it ran is carried out at its next start.
    @Test func appsCommandsReachARunningNode() async throws {
        try await offPool { () throws in
            let scratch = temporaryDirectory("roomcast-ops-apps")
            defer { try? FileManager.default.removeItem(atPath: scratch) }
            let data = scratch + "/data"
            var g = try GatewayProcess(dataDirectory: data)
            defer { g.stop() }
            let added = try roomcastCommand(["apps", "add", "acme", "--data-dir", data, "--secret", "acme-secret-0123456789"])
            #expect(added.status == 0 && added.output.contains("App-Key:    acme") && added.output.contains("applies the change within 2 s"))
            let acme = RESTClient(port: g.port, appKey: "acme", secret: "acme-secret-0123456789")
            #expect(try eventually(timeout: 5) { try acme.call("POST", "/v1/rooms", ["roomId": "acme-room"], headers: nil).status == 201 })

            let rotated = try roomcastCommand(["apps", "rotate-secret", "acme", "--data-dir", data])
            let secret = try #require(rotated.output.split(separator: "\n").first { $0.hasPrefix("App-Secret: ") }?.split(separator: " ").last.map(String.init))
            #expect(rotated.output.contains("the previous secret stays valid until"))
            let renewed = RESTClient(port: g.port, appKey: "acme", secret: secret)
            #expect(try eventually(timeout: 5) { try renewed.call("GET", "/v1/settings").status == 200 })
            #expect(try acme.call("GET", "/v1/settings").status == 200, "the previous secret within its grace")

            let before = try roomcastCommand(["apps", "list", "--data-dir", data, "--secrets"])
            for bad in [["apps", "disable", "nobody"], ["apps", "add", "acme"], ["apps", "add", "bad key"], ["apps", "rotate-secret", "acme", "--secret", "short"]] {
                let r = try roomcastCommand(bad + ["--data-dir", data])
                #expect(r.status == 1 && r.output.contains("roomcast: error "), "\(bad): \(r.output)")
            }
            #expect(try roomcastCommand(["apps", "disable", "nobody", "--data-dir", data]).output.contains("error 40410"))
            #expect(try roomcastCommand(["apps", "add", "acme", "--data-dir", data]).output.contains("error 40902"))
            #expect(try roomcastCommand(["apps", "list", "--data-dir", data, "--secrets"]).output == before.output)
            #expect(before.output.contains("acme  active  origin=api") && before.output.contains("secret=\(secret)"))

            #expect(try roomcastCommand(["apps", "disable", "acme", "--data-dir", data]).status == 0)
            #expect(try eventually(timeout: 5) { try renewed.call("GET", "/v1/settings").json.int("code") == 40311 })
            #expect(try g.rest().call("GET", "/v1/settings").status == 200, "another app is untouched")

            let removed = try roomcastCommand(["apps", "remove", "acme", "--data-dir", data])
            #expect(removed.status == 0 && removed.output.contains("deleted when the node next starts"))
            g.stop()
            g = try GatewayProcess(dataDirectory: data)
            let after = try roomcastCommand(["apps", "list", "--data-dir", data])
            #expect(after.status == 0 && !after.output.contains("acme") && after.output.contains("testapp"))
            #expect(try g.rest().call("GET", "/v1/rooms/acme-room").status != 200)
        }
    }

    // OP-3: a data directory written by a newer roomcast is refused at start with a message that
    // names it, exit 1, and its database is left as it was.
    @Test func aNewerDataDirectoryIsRefusedAtStart() async throws {
        try await offPool { () throws in
            let scratch = temporaryDirectory("roomcast-ops-newer")
            defer { try? FileManager.default.removeItem(atPath: scratch) }
            let g = try GatewayProcess(dataDirectory: scratch)
            #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "kept"]).status == 201)
            g.process.signal(SIGTERM)
            #expect(g.process.waitForExit() == 0)
            let path = scratch + "/roomcast.sqlite"
            let q = try DatabaseQueue(path: path)
            try q.write { try $0.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v42-from-a-newer-roomcast')") }
            try q.close()
            let digest = fileDigest(path)
            let refused = try RunningProcess(path: try productPath("roomcast"), arguments: ["--port", "0", "--data-dir", scratch, "--app", "testapp:test-secret-123456"])
            let (status, output) = refused.finish(timeout: 30)
            #expect(status == 1)
            #expect(output.contains("roomcast: error 40915") && output.contains("written by a newer roomcast (schema version 42")
                    && output.contains("Nothing was changed"), "\(output)")
            #expect(!output.contains("listening on"))
            #expect(fileDigest(path) == digest)
            let list = try roomcastCommand(["apps", "list", "--data-dir", scratch])
            #expect(list.status == 1 && list.output.contains("error 40915"))
        }
    }

    // OP-3: a data directory written by an earlier build (a committed fixture the build at that
    // commit made, scripts/make-upgrade-fixture.sh) opens, migrates and serves its data.
    @Test func anEarlierBuildsDataDirectoryServes() async throws {
        try await offPool { () throws in
            let fixtures = UpgradeFixtures.all
            #expect(fixtures.count >= 2, "fixtures from at least two earlier commits")
            guard let oldest = fixtures.first else { return }
            let scratch = temporaryDirectory("roomcast-ops-upgrade")
            defer { try? FileManager.default.removeItem(atPath: scratch) }
            try FileManager.default.copyItem(atPath: oldest.database, toPath: scratch + "/roomcast.sqlite")
            let m = oldest.manifest
            let g = try GatewayProcess(appKey: m.app.key, secret: m.app.secret, dataDirectory: scratch)
            defer { g.stop() }
            let rest = g.rest()
            for (room, name) in m.rooms {
                #expect(try rest.call("GET", "/v1/rooms/\(room)").json.obj("room").str("name") == name)
            }
            let history = try rest.call("GET", "/v1/rooms/lobby/messages?order=asc&limit=100")
            #expect((history.json["messages"] as? [[String: Any]] ?? []).compactMap { $0.str("content") } == m.messages.map(\.content))
            let mutes = try rest.call("GET", "/v1/rooms/lobby/mutes").text
            // (Temporary mutes end 30 days after the fixture was made; the store test checks them.)
            for mute in m.permanentMutes { #expect(mutes.contains("\"\(mute.user)\""), "\(mutes)") }
            let hooks = try rest.call("GET", "/v1/webhooks").text
            for url in m.webhookEndpoints { #expect(hooks.contains(url.replacingOccurrences(of: "/", with: "\\/")) || hooks.contains(url)) }
            let after = try rest.call("POST", "/v1/rooms/lobby/messages", ["content": "after the upgrade"])
            #expect(after.status == 201, "\(after.status) \(after.text)")
        }
    }
}
