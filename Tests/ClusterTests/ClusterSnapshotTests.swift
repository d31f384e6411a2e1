import Cluster
import Foundation
import Testing
import TestKit
#if canImport(Glibc)
import Glibc
#endif

/// Issue 12, CLUSTER.md "Snapshots and trimming": the leader publishes the cluster's state at a
/// log position and trims the log below it; a node that starts later starts from the snapshot,
/// not the log's first entry, and is in the same state as the others — sessions connected before
/// the snapshot, mutes with their deadlines, history beyond the in-memory window, room offsets.
/// In the serialized suite of ClusterKeysTests.swift.
extension ClusterAcrossNodesTests {
    static func snapshotPosition(_ c: TestCluster, _ i: Int) throws -> Int {
        ((try c.readyz(i).json["cluster"] as? [String: Any])?["snapshot"] as? NSNumber)?.intValue ?? 0
    }

    static func history(_ c: TestCluster, node: Int, room: String = "r") throws -> [String] {
        let r = try c[node].rest().call("GET", "/v1/rooms/\(room)/messages?limit=100&order=asc")
        return ((r.json["messages"] as? [[String: Any]]) ?? []).map { "\($0.str("messageId") ?? "-") \($0.str("content") ?? "-")" }
    }

    @Test func aNodeStartsFromASnapshotAndTheLogIsTrimmed() async throws {
        try await offPool { () throws in
            let c = try TestCluster(nodeTimeout: 6, database: "snapshots", extra: ["--snapshot-every", "40", "--snapshot-interval", "1"])
            #expect(try c[0].rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            // The 70 messages below go as fast as the nodes answer: past the room's share for normal
            // messages (QS-2, 100 a second by default), which this test is not about.
            #expect(try c[0].rest().call("PATCH", "/v1/settings", ["roomMessagesPerSecond": 100_000]).status == 200)
            // Sessions that cross the snapshot: alice on node 1, bob on node 2.
            let alice = try c[1].client("alice"), bob = try c[2].client("bob")
            for client in [alice, bob] { _ = try client.expectOK(try client.command("room.join", ["roomId": "r"])) }
            // State with deadlines and order: a temporary mute, attributes, a queue element.
            #expect(try c[0].rest().call("POST", "/v1/rooms/r/mutes", ["userIds": ["dave"], "minutes": 5]).status == 200)
            #expect(try c[0].rest().call("PUT", "/v1/rooms/r/attributes", ["entries": ["topic": "snap", "seat": "1"]]).status == 200)
            // More messages than a room keeps in memory (50): history comes from the replica too.
            for i in 0..<70 {
                #expect(try c[i % 3].rest().call("POST", "/v1/rooms/r/messages", ["content": "m\(i)", "fromUserId": "admin"]).status == 201)
            }

            // The leader publishes a snapshot and trims the log below it.
            let db = try PGConnection(c.url)
            let deadline = Date().addingTimeInterval(30)
            var first: Int64 = 0, snapshot: Int64 = 0
            while Date() < deadline {
                first = Int64(try db.query("SELECT coalesce(min(position), 0) FROM roomcast_log").scalar ?? "0") ?? 0
                snapshot = Int64(try db.query("SELECT coalesce(max(position), 0) FROM roomcast_snapshots").scalar ?? "0") ?? 0
                if first > 1 && snapshot > 40 { break }
                // Entries keep coming now and then (a live cluster), so that trimming has room.
                usleep(200_000)
            }
            #expect(snapshot > 40, "no snapshot was published")
            #expect(first > 1, "the log was not trimmed (first position \(first))")
            #expect(first <= snapshot, "the log was trimmed past its newest snapshot")
            #expect(Int(try db.query("SELECT count(*) FROM roomcast_snapshots").scalar ?? "9") ?? 9 <= 2)
            #expect(try (0..<3).map { try Self.snapshotPosition(c, $0) }.contains { $0 > 0 })

            // A node that starts now starts from the snapshot (the log no longer has its start).
            try c.settle()
            c.nodes.append(try TestCluster.start(3, url: c.url, timeout: c.timeout, extra: c.extra))
            try c.waitReady(3)
            try c.settle()
            #expect(try Self.snapshotPosition(c, 3) >= Int(snapshot))
            // The same state as a node that applied the whole log.
            let expected = try Self.history(c, node: 0)
            #expect(expected.count == 70)
            #expect(try Self.history(c, node: 3) == expected)
            #expect(try ClusterGatewayTests.members(c, node: 3) == ["alice", "bob"])
            #expect(try ClusterGatewayTests.members(c, node: 3) == ClusterGatewayTests.members(c, node: 0))
            for path in ["/v1/rooms/r/mutes", "/v1/rooms/r/attributes", "/v1/rooms/r"] {
                #expect(try c[3].rest().call("GET", path).text == c[0].rest().call("GET", path).text, "\(path)")
            }

            // It serves the chat: a client on it receives alice's message at the same offset as bob.
            let carol = try c[3].client("carol")
            _ = try carol.expectOK(try carol.command("room.join", ["roomId": "r"]))
            _ = try alice.expectOK(try alice.command("room.send", ["roomId": "r", "content": "after"]))
            let atB = try bob.waitFor("room.message") { $0.obj("data").obj("message").str("content") == "after" }
            let atC = try carol.waitFor("room.message") { $0.obj("data").obj("message").str("content") == "after" }
            #expect(atB.int("offset") != nil && atB.int("offset") == atC.int("offset"))
            #expect(atB.str("epoch") == atC.str("epoch"))

            // A session from before the snapshot ends through it too: alice's node dies, and carol
            // (on the node that started from the snapshot) sees her leave.
            _ = carol.drain(for: 0.3)
            c.kill(1)
            _ = try carol.waitFor("room.memberChanged", timeout: 30) { e in
                (e.obj("data")["members"] as? [[String: Any]] ?? []).contains { $0.str("userId") == "alice" && $0.str("action") == "quit" }
            }
            try c.settle()
            let after3 = try ClusterGatewayTests.members(c, node: 3), after0 = try ClusterGatewayTests.members(c, node: 0)
            #expect(after3 == ["bob", "carol"])
            #expect(after0 == ["bob", "carol"])
        }
    }
}

/// Issue 31 (CL-9), CLUSTER.md "Snapshots and trimming": catch-up from a node's own position. A
/// node that stops cleanly records its replica's position; its next start opens that replica as
/// it is and applies only what the log added since, when the log still holds that position. A
/// run that crashed, a damaged record, or a log trimmed past the position: the node starts from
/// the snapshot (or the log) as before. Each start ends in the same state as the other nodes.
extension ClusterAcrossNodesTests {
    static func start(_ c: TestCluster, _ i: Int) throws -> (kind: String, position: Int) {
        let cluster = try c.readyz(i).json["cluster"] as? [String: Any] ?? [:]
        return (cluster["start"] as? String ?? "-", (cluster["startPosition"] as? NSNumber)?.intValue ?? -1)
    }

    static func stopCleanly(_ c: TestCluster, _ i: Int) -> Int32? {
        c[i].process.signal(SIGTERM)
        let status = c[i].process.waitForExit(timeout: 30)
        c.nodes[i] = nil
        return status
    }

    static func expectSameState(_ c: TestCluster, _ i: Int, messages: Int, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try c.settle()
        let expected = try Self.history(c, node: 0)
        // (History answers the first 100.)
        #expect(expected.count == min(messages, 100), sourceLocation: sourceLocation)
        #expect(try Self.history(c, node: i) == expected, sourceLocation: sourceLocation)
        #expect(try ClusterGatewayTests.members(c, node: i) == ClusterGatewayTests.members(c, node: 0), sourceLocation: sourceLocation)
        for path in ["/v1/rooms/r/attributes", "/v1/rooms/r"] {
            #expect(try c[i].rest().call("GET", path).text == c[0].rest().call("GET", path).text, "\(path)", sourceLocation: sourceLocation)
        }
    }

    @Test("CL-9: a node that stopped cleanly catches up from its own replica's position")
    func aStoppedNodeCatchesUpFromItsOwnPosition() async throws {
        try await offPool { () throws in
            // Snapshots every 150 entries: none before the last phase, which makes one and trims.
            let c = try TestCluster(nodeTimeout: 6, database: "ownposition", extra: ["--snapshot-every", "150", "--snapshot-interval", "1"])
            #expect(try c[0].rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let alice = try c[0].client("alice")
            _ = try alice.expectOK(try alice.command("room.join", ["roomId": "r"]))
            var sent = 0
            func send(_ n: Int, via nodes: [Int]) throws {
                for k in 0..<n {
                    var r = try c[nodes[k % nodes.count]].rest().call("POST", "/v1/rooms/r/messages", ["content": "m\(sent)", "fromUserId": "admin"])
                    // 429 while the log is filled for a trim (the app's REST rate, or the room's
                    // latency budget on a loaded machine, QS-2): the refused call changed nothing
                    // and is sent again.
                    for _ in 0..<50 where r.status == 429 {
                        usleep(100_000)
                        r = try c[nodes[k % nodes.count]].rest().call("POST", "/v1/rooms/r/messages", ["content": "m\(sent)", "fromUserId": "admin"])
                    }
                    #expect(r.status == 201, "\(r.status) \(r.text)")
                    sent += 1
                }
            }
            try send(20, via: [0, 1, 2])
            try c.settle()
            #expect(try Self.start(c, 2).kind == "log")

            // Node 2 stops cleanly: it records its replica's position beside the replica.
            let directory = c[2].dataDirectory
            let checkpoint = directory + "/replica.sqlite.checkpoint"
            #expect(Self.stopCleanly(c, 2) == 0)
            #expect(FileManager.default.fileExists(atPath: checkpoint))
            let db = try PGConnection(c.url)
            let stoppedAt = Int(try db.query("SELECT coalesce(max(position), 0) FROM roomcast_log").scalar ?? "0") ?? 0
            // The others go on without it.
            try send(15, via: [0, 1])
            #expect(try c[0].rest().call("PUT", "/v1/rooms/r/attributes", ["entries": ["topic": "while away"]]).status == 200)

            // It starts again on its data directory: from its own replica, where it stopped (its
            // last entries, the end of its sessions, were appended as it left), and catches up.
            c.nodes[2] = try c.start(2, dataDirectory: directory)
            try c.waitReady(2)
            let own = try Self.start(c, 2)
            #expect(own.kind == "own-replica")
            #expect(own.position > 0 && own.position <= stoppedAt, "started at \(own.position), the log's head was \(stoppedAt)")
            #expect(!FileManager.default.fileExists(atPath: checkpoint), "the record outlived the start that used it")
            try Self.expectSameState(c, 2, messages: sent)
            // It serves: a client on it gets a message sent through node 1 at the same offset as alice.
            let bob = try c[2].client("bob")
            _ = try bob.expectOK(try bob.command("room.join", ["roomId": "r"]))
            #expect(try c[1].rest().call("POST", "/v1/rooms/r/messages", ["content": "hello bob", "fromUserId": "admin"]).status == 201)
            sent += 1
            let atA = try alice.waitFor("room.message") { $0.obj("data").obj("message").str("content") == "hello bob" }
            let atB = try bob.waitFor("room.message") { $0.obj("data").obj("message").str("content") == "hello bob" }
            #expect(atA.int("offset") != nil && atA.int("offset") == atB.int("offset"))

            // A run that crashed records nothing: the next start makes the replica anew.
            c.kill(2)
            #expect(!FileManager.default.fileExists(atPath: checkpoint))
            try send(5, via: [0, 1])
            c.nodes[2] = try c.start(2, dataDirectory: directory)
            try c.waitReady(2)
            #expect(try Self.start(c, 2).kind == "log")
            try Self.expectSameState(c, 2, messages: sent)

            // A damaged record is not used.
            #expect(Self.stopCleanly(c, 2) == 0)
            #expect(FileManager.default.fileExists(atPath: checkpoint))
            #expect(FileManager.default.createFile(atPath: checkpoint, contents: Data("{\"version\":1,\"position\":".utf8)))
            c.nodes[2] = try c.start(2, dataDirectory: directory)
            try c.waitReady(2)
            #expect(try Self.start(c, 2).kind == "log")
            #expect(!FileManager.default.fileExists(atPath: checkpoint))
            try Self.expectSameState(c, 2, messages: sent)

            // The log trimmed past its position while it was away: it starts from the snapshot.
            #expect(Self.stopCleanly(c, 2) == 0)
            let away = Int(try db.query("SELECT coalesce(max(position), 0) FROM roomcast_log").scalar ?? "0") ?? 0
            let deadline = Date().addingTimeInterval(40)
            var first = 0
            while Date() < deadline {
                try send(10, via: [0, 1])
                first = Int(try db.query("SELECT coalesce(min(position), 0) FROM roomcast_log").scalar ?? "0") ?? 0
                if first > away { break }
            }
            #expect(first > away, "the log was not trimmed past \(away) (first position \(first))")
            c.nodes[2] = try c.start(2, dataDirectory: directory)
            try c.waitReady(2)
            let fallback = try Self.start(c, 2)
            #expect(fallback.kind == "snapshot" && fallback.position >= first - 1, "\(fallback)")
            #expect(!FileManager.default.fileExists(atPath: checkpoint))
            try Self.expectSameState(c, 2, messages: sent)
        }
    }
}

/// Issue 31 (CL-9), CLUSTER.md "Snapshots and trimming": snapshots of any size. Each part is
/// compressed with zlib and stored in chunks (here a few bytes or kilobytes, injected, so that
/// small data spans many), the row and its chunks in one transaction; reading puts the parts back
/// byte for byte and refuses a damaged or incomplete snapshot; trimming deletes the chunks of the
/// snapshots it deletes; a snapshot in the previous format (one row, parts inline) still loads.
@Suite("Cluster snapshots in chunks (CL-9)", .serialized)
struct ClusterSnapshotChunkTests {
    static func migrated(_ name: String) throws -> (PostgresServer, PGConnection) {
        let pg = try PostgresServer()
        let db = try PGConnection(try ClusterLogTests.database(pg, name))
        try ClusterSchema.migrate(db)
        return (pg, db)
    }

    /// What an engine's state looks like: JSON, repetitive.
    static func state(_ n: Int) -> [UInt8] {
        var s = "{\"position\":\(n),\"rooms\":["
        for i in 0..<n { s += "{\"roomId\":\"room-\(i)\",\"members\":[\"alice\",\"bob\",\"user-\(i % 97)\"],\"epoch\":\"e\(i % 13)\",\"offset\":\(i * 7)}," }
        return Array((s + "{}]}").utf8)
    }

    /// Bytes that hardly compress (a linear congruential generator's high bytes).
    static func noise(_ n: Int, seed: UInt64) -> [UInt8] {
        var x = seed
        return (0..<n).map { _ in
            x = x &* 6364136223846793005 &+ 1442695040888963407
            return UInt8(truncatingIfNeeded: x >> 56)
        }
    }

    static func scalar(_ db: PGConnection, _ sql: String, _ parameters: [String?] = []) throws -> Int {
        Int(try db.query(sql, parameters).scalar ?? "-1") ?? -1
    }

    /// `latest` refuses the snapshot as damaged, read into memory and (CL-9) written to a file,
    /// which it then leaves behind neither whole nor in part.
    static func expectRefused(_ db: PGConnection, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            let s = try ClusterSnapshots.latest(db)
            Issue.record("\(what): a snapshot was read (\(s?.state.count ?? -1) + \(s?.replica.count ?? -1) bytes)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.sqlState == "XX001" && error.message.contains("damaged"), "\(what): \(error)", sourceLocation: sourceLocation)
        }
        let file = temporaryDirectory("roomcast-snapshot-file") + "/replica.download"
        do {
            let s = try ClusterSnapshots.latest(db, replicaFile: file, pieceBytes: 333)
            Issue.record("\(what): a snapshot was written to a file (\(s?.state.count ?? -1) bytes of state)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.sqlState == "XX001" && error.message.contains("damaged"), "\(what), to a file: \(error)", sourceLocation: sourceLocation)
        }
        #expect(!FileManager.default.fileExists(atPath: file), "\(what): a damaged replica was left in a file", sourceLocation: sourceLocation)
    }

    /// CL-9: the replica's part read from a producer in pieces (as the leader reads its copy on
    /// disk) and written to a file in pieces (as a starting node writes its replica): many chunks,
    /// byte for byte, and the same stored bytes as the part read whole would give.
    @Test("CL-9: a replica part read in pieces and written to a file in pieces round-trips")
    func aReplicaPartStreamsThroughFiles() throws {
        let (pg, db) = try Self.migrated("streams")
        defer { withExtendedLifetime(pg) {} }
        let state = Self.state(400)
        let replica = Self.noise(150_000, seed: 11) + Array(repeating: 7, count: 200_000) + Self.state(2_000)
        var pieces = 0
        let published = try ClusterSnapshots.put(
            db, ClusterSnapshots.Stored(position: 9, at: 90, node: "leader", format: 3, state: state, replica: []),
            replica: { (consume: (UnsafeRawBufferPointer) throws(PGError) -> Void) throws(PGError) in
                // Pieces of uneven sizes, as reads of a file may give.
                var offset = 0
                while offset < replica.count {
                    let n = min(replica.count - offset, 1 + (pieces * 7_919) % 20_000)
                    var failed: PGError?
                    replica[offset..<offset + n].withUnsafeBytes { b in
                        do throws(PGError) { try consume(b) } catch { failed = error }
                    }
                    if let failed { throw failed }
                    offset += n
                    pieces += 1
                }
            }, createdAt: 1, chunkBytes: 2_048)
        #expect(published.stored && pieces > 20)
        #expect(try Self.scalar(db, "SELECT count(*) FROM roomcast_snapshot_chunks WHERE part = 1") > 20)
        #expect(try db.query("SELECT replica_bytes FROM roomcast_snapshots").scalar == String(replica.count))

        let file = temporaryDirectory("roomcast-snapshot-file") + "/replica.download"
        try Data("stale".utf8).write(to: URL(fileURLWithPath: file))
        let read = try #require(try ClusterSnapshots.latest(db, replicaFile: file, pieceBytes: 1_000))
        #expect(read.position == 9 && read.node == "leader" && read.state == state)
        #expect(read.replica.isEmpty, "the replica went to the file, not to memory")
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: file))) == replica)
        // Read into memory, the same bytes.
        #expect(try ClusterSnapshots.latest(db)?.replica == replica)
        // A damaged chunk: refused, and the file is gone.
        try db.query("UPDATE roomcast_snapshot_chunks SET data = set_byte(data, 100, get_byte(data, 100) # 16) WHERE part = 1 AND seq = 50")
        Self.expectRefused(db, "a changed chunk")
        // Where a good one had been written before: that one is gone too.
        #expect(throws: PGError.self) { try ClusterSnapshots.latest(db, replicaFile: file) }
        #expect(!FileManager.default.fileExists(atPath: file))

        // A snapshot of the previous format (parts inline) is written to the file as well.
        let file2 = temporaryDirectory("roomcast-snapshot-file") + "/replica.download"
        try db.query("DELETE FROM roomcast_snapshots")
        try db.query("INSERT INTO roomcast_snapshots (position, at, node, created_at, format, encoding, state, replica) VALUES (10, 1, 'old', 1, 3, 0, $1::bytea, $2::bytea)",
                     ["\\x" + state.map { String(format: "%02x", $0) }.joined(), "\\x" + replica.prefix(5_000).map { String(format: "%02x", $0) }.joined()])
        let old = try #require(try ClusterSnapshots.latest(db, replicaFile: file2))
        #expect(old.position == 10 && old.state == state && old.replica.isEmpty)
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: file2))) == Array(replica.prefix(5_000)))
    }

    // CL-9: a snapshot spanning many chunks comes back byte for byte; repetitive data shrinks;
    // a second snapshot at the same position changes nothing; empty parts and one-byte chunks work.
    @Test func aChunkedSnapshotRoundTripsByteForByte() throws {
        let (pg, db) = try Self.migrated("chunks")
        defer { withExtendedLifetime(pg) {} }
        let state = Self.state(3_000)
        let replica = Self.noise(40_000, seed: 7) + Array(repeating: 0, count: 100_000) + Self.noise(25_000, seed: 9)
        let s = ClusterSnapshots.Stored(position: 42, at: 1_000, node: "node-a", format: 3, state: state, replica: replica)
        let published = try ClusterSnapshots.put(db, s, createdAt: 5, chunkBytes: 4_096)
        #expect(published.stored)
        let stateChunks = try Self.scalar(db, "SELECT count(*) FROM roomcast_snapshot_chunks WHERE position = 42 AND part = 0")
        let replicaChunks = try Self.scalar(db, "SELECT count(*) FROM roomcast_snapshot_chunks WHERE position = 42 AND part = 1")
        #expect(stateChunks >= 3 && replicaChunks >= 10, "\(stateChunks) and \(replicaChunks) chunks")
        #expect(published.chunks == stateChunks + replicaChunks)
        #expect(try Self.scalar(db, "SELECT max(octet_length(data)) FROM roomcast_snapshot_chunks") == 4_096)
        #expect(try Self.scalar(db, "SELECT sum(octet_length(data)) FROM roomcast_snapshot_chunks") == published.compressedBytes)
        // Compression shrinks what repeats (the state: JSON; the replica: its zero pages), not the noise.
        let stateStored = try Self.scalar(db, "SELECT sum(octet_length(data)) FROM roomcast_snapshot_chunks WHERE position = 42 AND part = 0")
        let replicaStored = try Self.scalar(db, "SELECT sum(octet_length(data)) FROM roomcast_snapshot_chunks WHERE position = 42 AND part = 1")
        #expect(stateStored * 5 < state.count, "state: \(state.count) bytes stored as \(stateStored)")
        #expect(replicaStored < 70_000 && replicaStored > 65_000, "replica: \(replica.count) bytes stored as \(replicaStored)")
        // The row holds no inline parts.
        #expect(try db.query("SELECT encoding, state IS NULL AND replica IS NULL, state_bytes, replica_bytes FROM roomcast_snapshots").rows
                == [["1", "t", String(state.count), String(replica.count)]])

        let read = try #require(try ClusterSnapshots.latest(db))
        #expect(read.position == 42 && read.at == 1_000 && read.node == "node-a" && read.format == 3)
        #expect(read.state == state)
        #expect(read.replica == replica)

        // The same position again: nothing is written (the first stays).
        let again = try ClusterSnapshots.put(db, ClusterSnapshots.Stored(position: 42, at: 2_000, node: "node-b", format: 3, state: [1], replica: [2]),
                                             createdAt: 6, chunkBytes: 4_096)
        #expect(!again.stored)
        #expect(try Self.scalar(db, "SELECT count(*) FROM roomcast_snapshot_chunks") == stateChunks + replicaChunks)
        #expect(try ClusterSnapshots.latest(db)?.node == "node-a")

        // Empty parts, and chunks of one byte.
        try ClusterSnapshots.put(db, ClusterSnapshots.Stored(position: 43, at: 2_000, node: "node-b", format: 3, state: [], replica: Array("tiny".utf8)),
                                 createdAt: 7, chunkBytes: 1)
        #expect(try Self.scalar(db, "SELECT max(octet_length(data)) FROM roomcast_snapshot_chunks WHERE position = 43") == 1)
        let tiny = try #require(try ClusterSnapshots.latest(db))
        #expect(tiny.position == 43 && tiny.state == [] && tiny.replica == Array("tiny".utf8))
        #expect(try ClusterSnapshots.latestPosition(db) == 43)
    }

    // CL-9: a damaged snapshot is an error, never a wrong state — a byte changed in a chunk, a
    // chunk missing, cut or added, a length or CRC-32 in the row that does not match.
    @Test func aDamagedOrIncompleteSnapshotIsRefused() throws {
        let (pg, db) = try Self.migrated("damage")
        defer { withExtendedLifetime(pg) {} }
        let state = Self.state(500), replica = Self.noise(20_000, seed: 3) + Self.state(800)
        try ClusterSnapshots.put(db, ClusterSnapshots.Stored(position: 7, at: 1, node: "n", format: 3, state: state, replica: replica),
                                 createdAt: 1, chunkBytes: 1_024)
        let chunks = try Self.scalar(db, "SELECT count(*) FROM roomcast_snapshot_chunks WHERE part = 1")
        #expect(chunks > 5)
        let intact = try #require(try ClusterSnapshots.latest(db))
        #expect(intact.state == state && intact.replica == replica)

        // One byte changed, in the middle of the replica's stream (each bit in turn, so some flips
        // still inflate and only the CRC-32 or the length finds them), and in the last chunk.
        let flip = "UPDATE roomcast_snapshot_chunks SET data = set_byte(data, $1::int, get_byte(data, $1::int) # $2::int) WHERE part = 1 AND seq = $3::int"
        for (offset, seq) in [(500, 2), (100, chunks - 1)] {
            for bit in [1, 2, 4, 8, 16, 32, 64, 128] {
                try db.query(flip, [String(offset), String(bit), String(seq)])
                Self.expectRefused(db, "bit \(bit) of byte \(offset) of chunk \(seq) changed")
                try db.query(flip, [String(offset), String(bit), String(seq)])
            }
        }
        #expect(try ClusterSnapshots.latest(db)?.replica == replica)

        // Chunks missing (in the middle, the last, all of a part), cut short, one too many, out of
        // place; the row's description changed. (Each damage is undone from a copy.)
        try db.query("CREATE TABLE intact_rows AS SELECT * FROM roomcast_snapshots")
        try db.query("CREATE TABLE intact_chunks AS SELECT * FROM roomcast_snapshot_chunks")
        for damage in [
            "DELETE FROM roomcast_snapshot_chunks WHERE part = 1 AND seq = 3",
            "DELETE FROM roomcast_snapshot_chunks WHERE part = 1 AND seq = \(chunks - 1)",
            "DELETE FROM roomcast_snapshot_chunks WHERE part = 0",
            "UPDATE roomcast_snapshot_chunks SET data = substring(data FROM 1 FOR 600) WHERE part = 1 AND seq = 2",
            "UPDATE roomcast_snapshot_chunks SET data = substring(data FROM 1 FOR octet_length(data) - 1) WHERE part = 1 AND seq = \(chunks - 1)",
            "INSERT INTO roomcast_snapshot_chunks (position, part, seq, data) VALUES (7, 1, \(chunks), '\\x00')",
            "UPDATE roomcast_snapshot_chunks SET seq = seq + 100 WHERE part = 0",
            "UPDATE roomcast_snapshots SET replica_crc = replica_crc # 1",
            "UPDATE roomcast_snapshots SET replica_bytes = replica_bytes - 1",
            "UPDATE roomcast_snapshots SET replica_bytes = replica_bytes + 1",
            "UPDATE roomcast_snapshots SET state_bytes = 1000000000000",
            "UPDATE roomcast_snapshots SET state_chunks = 0",
        ] {
            try db.query(damage)
            Self.expectRefused(db, damage)
            try db.query("DELETE FROM roomcast_snapshots")
            try db.query("INSERT INTO roomcast_snapshots SELECT * FROM intact_rows")
            try db.query("INSERT INTO roomcast_snapshot_chunks SELECT * FROM intact_chunks")
        }
        #expect(try ClusterSnapshots.latest(db)?.replica == replica)
    }

    // CL-9: trimming deletes the chunks of the snapshots it deletes (the two newest stay and read
    // back); a snapshot and its chunks are written in one transaction (a failed write leaves none).
    @Test func trimmingDeletesChunksAndAFailedWriteLeavesNone() throws {
        let (pg, db) = try Self.migrated("trim")
        defer { withExtendedLifetime(pg) {} }
        for position: Int64 in [10, 20, 30] {
            try ClusterSnapshots.put(db, ClusterSnapshots.Stored(position: position, at: position, node: "n", format: 3,
                                                                 state: Self.state(Int(position) * 10), replica: Self.noise(3_000, seed: UInt64(position))),
                                     createdAt: position, chunkBytes: 512)
        }
        #expect(try Self.scalar(db, "SELECT count(DISTINCT position) FROM roomcast_snapshot_chunks") == 3)
        try ClusterSnapshots.trim(db, below: 30)
        #expect(try db.query("SELECT position FROM roomcast_snapshots ORDER BY position").rows == [["20"], ["30"]])
        #expect(try db.query("SELECT DISTINCT position FROM roomcast_snapshot_chunks ORDER BY position").rows == [["20"], ["30"]])
        let newest = try #require(try ClusterSnapshots.latest(db))
        #expect(newest.position == 30 && newest.state == Self.state(300) && newest.replica == Self.noise(3_000, seed: 30))

        // A write that fails half-way (PostgreSQL refuses the replica's sixth chunk) leaves no row
        // and no chunk; the same snapshot is published once the fault is gone.
        let before = try Self.scalar(db, "SELECT count(*) FROM roomcast_snapshot_chunks")
        try db.query("""
            CREATE FUNCTION refuse_chunk() RETURNS trigger LANGUAGE plpgsql AS $fn$
            BEGIN
                IF NEW.part = 1 AND NEW.seq = 5 THEN RAISE EXCEPTION 'injected fault'; END IF;
                RETURN NEW;
            END
            $fn$
            """)
        try db.query("CREATE TRIGGER refuse_chunk BEFORE INSERT ON roomcast_snapshot_chunks FOR EACH ROW EXECUTE FUNCTION refuse_chunk()")
        let fifth = ClusterSnapshots.Stored(position: 40, at: 40, node: "n", format: 3, state: Self.state(2_000), replica: Self.noise(5_000, seed: 40))
        do {
            try ClusterSnapshots.put(db, fifth, createdAt: 40, chunkBytes: 512)
            Issue.record("the write did not fail")
        } catch {
            #expect(error.message.contains("injected fault"), "\(error)")
        }
        #expect(try ClusterSnapshots.latestPosition(db) == 30)
        #expect(try Self.scalar(db, "SELECT count(*) FROM roomcast_snapshot_chunks") == before)
        try db.query("DROP TRIGGER refuse_chunk ON roomcast_snapshot_chunks")
        #expect(try ClusterSnapshots.put(db, fifth, createdAt: 41, chunkBytes: 512).stored)
        #expect(try ClusterSnapshots.latest(db)?.replica == fifth.replica)
    }

    // CL-9: a cluster upgraded from schema version 6 still reads its snapshot (one row, the parts
    // inline), as well as one a version-6 node publishes after the upgrade; then new ones are
    // chunked, and trimming deletes old and new alike.
    @Test func anOldFormatSnapshotStillLoads() throws {
        let pg = try PostgresServer()
        let db = try PGConnection(try ClusterLogTests.database(pg, "upgrade"))
        // The schema as version 6 left it, with a snapshot written the way version 6 writes it.
        try db.query("CREATE TABLE roomcast_schema (version integer NOT NULL)")
        for v in 0..<6 {
            for statement in ClusterSchema.migrations[v] { try db.query(statement) }
            try db.query("INSERT INTO roomcast_schema (version) VALUES ($1)", [String(v + 1)])
        }
        let oldInsert = "INSERT INTO roomcast_snapshots (position, at, node, created_at, format, state, replica) VALUES ($1, $2, 'old', 1, 3, $3, $4)"
        let state = Self.state(200), replica = Self.noise(5_000, seed: 1)
        func hex(_ b: [UInt8]) -> String { "\\x" + b.map { String(format: "%02x", $0) }.joined() }
        try db.query(oldInsert, ["5", "50", hex(state), hex(replica)])

        #expect(try ClusterSchema.migrate(db) == ClusterSchema.version - 6)
        let old = try #require(try ClusterSnapshots.latest(db))
        #expect(old.position == 5 && old.at == 50 && old.node == "old" && old.format == 3 && old.state == state && old.replica == replica)

        // A node still on version 6 publishes during the rolling upgrade: read too.
        try db.query(oldInsert, ["6", "60", hex(Self.state(300)), hex([])])
        let fromOld = try #require(try ClusterSnapshots.latest(db))
        #expect(fromOld.position == 6 && fromOld.state == Self.state(300) && fromOld.replica == [])

        // A new one is chunked; trimming keeps the two newest, whatever their format.
        try ClusterSnapshots.put(db, ClusterSnapshots.Stored(position: 9, at: 90, node: "new", format: 3, state: state, replica: replica),
                                 createdAt: 2, chunkBytes: 256)
        #expect(try ClusterSnapshots.latest(db)?.replica == replica)
        try ClusterSnapshots.trim(db, below: 9)
        #expect(try db.query("SELECT position, encoding FROM roomcast_snapshots ORDER BY position").rows == [["6", "0"], ["9", "1"]])
        try ClusterSnapshots.put(db, ClusterSnapshots.Stored(position: 12, at: 120, node: "new", format: 3, state: state, replica: []),
                                 createdAt: 3, chunkBytes: 256)
        try ClusterSnapshots.trim(db, below: 12)
        #expect(try db.query("SELECT DISTINCT position FROM roomcast_snapshot_chunks ORDER BY position").rows == [["9"], ["12"]])
        #expect(try ClusterSnapshots.latest(db)?.state == state)
    }
}
