import Chat
import Foundation
@testable import Gateway
import Testing
import TestKit
import WebSocket
import Wire

/// Defects an outside audit found in the WebSocket protocol and the address lookup, over real
/// sockets (they are about bytes on the wire and the bound port).
@Suite("Protocol hardening over real sockets")
struct HardeningTests {
    /// Reads frames until one whose `id` is `id` (collecting events), or a close.
    func answer(_ ws: WSClient, id: Int) throws -> [String: Any] {
        while true {
            switch try ws.readFrame(timeout: 5) {
            case .text(let s):
                let m = (try JSONSerialization.jsonObject(with: Data(s.utf8))) as? [String: Any] ?? [:]
                if (m["id"] as? NSNumber)?.intValue == id { return m }
            case .close(let code, _): throw TestKitError.protocolError("closed \(code ?? 0)")
            default: continue
            }
        }
    }

    func frame(_ object: [String: Any]) throws -> [UInt8] {
        WebSocketFrameEncoder.frame(opcode: .text, payload: Array(try JSONSerialization.data(withJSONObject: object)), fin: true,
                                    maskKey: UInt32.random(in: 0...UInt32.max))
    }

    // §2: commands sent in the same TCP write as connect are processed in order after it (they
    // used to be refused with "wait for the connect answer").
    @Test func commandsInTheSameWriteAsConnectAreAnsweredInOrder() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess()
            defer { g.stop() }
            let rest = g.rest()
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "same-write"]).status == 201)
            let ws = try WSClient(port: g.port, path: "/ws")
            let token = try rest.token("ann")
            try ws.tcp.send(try frame(["id": 1, "op": "connect", "args": ["token": token]])
                            + frame(["id": 2, "op": "room.join", "args": ["roomId": "same-write"]])
                            + frame(["id": 3, "op": "room.send", "args": ["roomId": "same-write", "content": "hi"]]))
            #expect(try answer(ws, id: 1)["ok"] != nil)
            let joined = try answer(ws, id: 2)
            #expect((joined["ok"] as? [String: Any])?["joinInfo"] != nil, "\(joined)")
            let sent = try answer(ws, id: 3)
            #expect(((sent["ok"] as? [String: Any])?["message"] as? [String: Any])?["content"] as? String == "hi", "\(sent)")
        }
    }

    // The 4000 close code is what the documents say: a message that is not a protocol message is
    // answered with an error (id null), then the connection is closed with 4000.
    @Test func aNonProtocolMessageIsClosedWith4000() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess()
            defer { g.stop() }
            let c = try g.client("ann")
            try c.ws.sendText("this is not json")
            var error: [String: Any]?
            var code: UInt16?
            loop: while true {
                switch try c.ws.readFrame(timeout: 5) {
                case .text(let s):
                    let m = (try JSONSerialization.jsonObject(with: Data(s.utf8))) as? [String: Any] ?? [:]
                    if m["error"] != nil { error = m }
                case .close(let cc, _):
                    code = cc
                    break loop
                default: continue
                }
            }
            #expect(error?["id"] is NSNull)
            #expect(((error?["error"] as? [String: Any])?["code"] as? NSNumber)?.intValue == ErrorCode.badRequest.rawValue)
            #expect(code == CloseCode.badRequest.rawValue)
            // An id that is not an integer is named as the field at fault.
            for id in ["4.5", "[1,2]", "\"7\""] {
                let e = try g.client("eve")
                try e.ws.sendText(#"{"id":\#(id),"op":"room.info","args":{"roomId":"x"}}"#)
                var field: String?
                var closed: UInt16?
                read: while true {
                    switch try e.ws.readFrame(timeout: 5) {
                    case .text(let s):
                        let m = (try JSONSerialization.jsonObject(with: Data(s.utf8))) as? [String: Any] ?? [:]
                        if let err = m["error"] as? [String: Any] { field = err["field"] as? String }
                    case .close(let cc, _):
                        closed = cc
                        break read
                    default: continue
                    }
                }
                #expect(field == "id" && closed == CloseCode.badRequest.rawValue, "\(id): \(field ?? "-") \(closed ?? 0)")
            }
            #expect(CloseCode.badRequest.reconnect == .never)
            // An unknown op with a valid envelope is only an error: the connection stays.
            let d = try g.client("dan")
            #expect(try d.command("room.dance", ["roomId": "x"]).obj("error").int("code") == ErrorCode.badRequest.rawValue)
            _ = try d.expectOK(try d.command("room.join", ["roomId": "x", "mode": "enter"]))
        }
    }

    // NIM-3: with --port 0 the address lookup hands out the bound port, not 0.
    @Test func addressLookupHandsOutTheBoundPort() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess()
            defer { g.stop() }
            let rest = g.rest()
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "live"]).status == 201)
            let addr = try rest.call("GET", "/v1/rooms/live/address?userId=u1&clientType=web")
            #expect(addr.json["addresses"] as? [String] == ["ws://127.0.0.1:\(g.port)/ws"])
        }
    }

    // BX-1 across a restart: offsets continue (a position names one event forever), and a client
    // that reconnects after a kill -9 and restart resumes with exactly the events it missed.
    @Test func resumeAcrossARestartGetsExactlyTheMissedEvents() async throws {
        try await offPool { () throws in
            let data = temporaryDirectory("roomcast-bx1-restart")
            var g = try GatewayProcess(dataDirectory: data)
            #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let alice = try g.client("alice"), bob = try g.client("bob")
            _ = try alice.expectOK(try alice.command("room.join", ["roomId": "r"]))
            _ = try bob.expectOK(try bob.command("room.join", ["roomId": "r"]))
            for i in 1...3 { _ = try alice.expectOK(try alice.command("room.send", ["roomId": "r", "content": "m\(i)"])) }
            let before = bob.drain().filter { $0.str("ev") == "room.message" }
            #expect(before.count == 3)
            let epoch = try #require(before.last?.str("epoch"))
            let last = try #require(before.last?.int("offset"))
            let seen = try #require(before.dropLast().last?.int("offset")) // bob pretends m3 never reached it
            let stream = bob.stream
            g.stop() // kill -9
            g = try GatewayProcess(dataDirectory: data)
            defer { g.stop() }
            // After the restart, new events continue the room's offsets.
            let carol = try g.client("carol")
            _ = try carol.expectOK(try carol.command("room.join", ["roomId": "r"]))
            #expect(try g.rest().call("POST", "/v1/rooms/r/messages", ["content": "after"]).status == 201)
            let after = try carol.waitFor("room.message")
            #expect(after.str("epoch") == epoch)
            #expect((after.int("offset") ?? 0) > last, "offsets restarted from 1: \(after)")
            #expect(carol.stream == stream, "the stream id is kept with the data")
            // bob reconnects and resumes from the last offset it saw.
            let bob2 = try g.client("bob")
            _ = try bob2.expectOK(try bob2.command("room.join", ["roomId": "r", "resume": ["epoch": epoch, "stream": stream, "offset": seen]]))
            let result = try bob2.waitFor("room.resume")
            #expect(result.obj("data")["resumed"] as? Bool == true, "\(result)")
            let replayed = bob2.skipped.filter { $0.int("offset") != nil }
            let offsets = replayed.compactMap { $0.int("offset") }
            #expect(offsets.first == last && offsets == Array(last...(offsets.last ?? last)), "replayed \(offsets)")
            #expect(replayed.first?.obj("data").obj("message").str("content") == "m3")
            #expect(replayed.contains { $0.obj("data").obj("message").str("content") == "after" })
            #expect(result.obj("data").int("replayed") == replayed.count)
        }
    }

    // AU-2, AU-1 across a restart: a message sent to listed members or to a tag is kept with
    // its audience, so a client resuming after a restart gets it only if it was addressed to it.
    @Test func resumeAfterARestartKeepsEachMessagesAudience() async throws {
        try await offPool { () throws in
            let data = temporaryDirectory("roomcast-au-restart")
            var g = try GatewayProcess(dataDirectory: data)
            #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let alice = try g.client("alice"), bob = try g.client("bob")
            let joined = try alice.expectOK(try alice.command("room.join", ["roomId": "r", "tags": ["vip"]]))
            let bobJoined = try bob.expectOK(try bob.command("room.join", ["roomId": "r"]))
            let epoch = try #require(joined.obj("joinInfo").obj("room").str("epoch"))
            let start = try #require(bobJoined.obj("joinInfo").int("offset"))
            let stream = bob.stream
            for body in [["content": "for-alice", "targets": ["alice"]], ["content": "for-vip", "targetTags": ["tag": "vip"]],
                         ["content": "for-all"]] as [[String: Any]] {
                #expect(try g.rest().call("POST", "/v1/rooms/r/messages", body).status == 201)
            }
            _ = try alice.waitFor("room.message") { $0.obj("data").obj("message").str("content") == "for-all" }
            _ = try bob.waitFor("room.message") { $0.obj("data").obj("message").str("content") == "for-all" }
            g.stop() // kill -9
            g = try GatewayProcess(dataDirectory: data)
            defer { g.stop() }
            func resumed(_ user: String, tags: [String]) throws -> [String] {
                let c = try g.client(user)
                _ = try c.expectOK(try c.command("room.join", ["roomId": "r", "tags": tags,
                                                               "resume": ["epoch": epoch, "stream": stream, "offset": start]]))
                let result = try c.waitFor("room.resume")
                #expect(result.obj("data")["resumed"] as? Bool == true, "\(result)")
                return c.skipped.filter { $0.str("ev") == "room.message" }.compactMap { $0.obj("data").obj("message").str("content") }
            }
            #expect(try resumed("alice", tags: ["vip"]) == ["for-alice", "for-vip", "for-all"])
            #expect(try resumed("bob", tags: []) == ["for-all"])
        }
    }

    // §2: a signed request cannot be replayed after a restart within its 300 s window (the nonce
    // memory used to be lost with the process).
    @Test func aSignedRequestCannotBeReplayedAfterARestart() async throws {
        try await offPool { () throws in
            let data = temporaryDirectory("roomcast-replay")
            var g = try GatewayProcess(dataDirectory: data)
            let rest = g.rest()
            let headers = rest.signatureHeaders()
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "once"], headers: headers).status == 201)
            let replayed = try rest.call("POST", "/v1/rooms", ["roomId": "twice"], headers: headers)
            #expect(replayed.status == 401 && replayed.json.int("code") == ErrorCode.nonceReused.rawValue)
            g.stop() // kill -9
            g = try GatewayProcess(dataDirectory: data)
            defer { g.stop() }
            let afterRestart = try g.rest().call("POST", "/v1/rooms", ["roomId": "thrice"], headers: headers)
            #expect(afterRestart.status == 401 && afterRestart.json.int("code") == ErrorCode.nonceReused.rawValue, "\(afterRestart.text)")
            #expect(try g.rest().call("GET", "/v1/rooms/thrice").status == 404)
            #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "fresh"]).status == 201)
        }
    }

    /// Resident memory of a process, in KiB (Linux).
    static func rssKiB(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    // SPEC §13 (audit: one end user could grow the server ~60 MiB/s): with an ordinary token, one
    // user creates rooms as fast as it can and fills them with the largest messages. Room creation
    // is held to the per-minute quota, and each room keeps at most 64 KiB of history in memory
    // (the rest is on disk), so the server's memory stays within a bound.
    @Test func oneUserCannotPushTheServerPastItsMemoryBound() async throws {
        try await offPool { () throws in
            // The memory bound is tested, not the rate limits (PX-1) nor the room's admission (QS-2:
            // its message budget, and its fan-out latency budget, which a loaded machine's backlog of
            // 16 KiB messages passes): lift them.
            let g = try GatewayProcess(extra: ["--fanout-latency-budget", "60000"])
            defer { g.stop() }
            #expect(try g.rest().call("PATCH", "/v1/settings", ["clientMessagesPerSecond": 1_000_000, "sendsPerUserPerSecond": 1_000_000,
                                                                 "roomMessagesPerSecond": 100_000]).status == 200)
            let pid = g.process.processIdentifier
            let c = try g.client("flood")
            let content = String(repeating: "x", count: Limits.defaultMaxMessageBytes)
            _ = try c.expectOK(try c.command("room.join", ["roomId": "warm", "mode": "enter"]))
            for _ in 0..<50 { _ = try c.expectOK(try c.command("room.send", ["roomId": "warm", "content": content])) }
            let before = Self.rssKiB(pid)
            var created = 0, refused = 0, sent = 0
            var notSent: [String] = []
            let started = Date()
            for i in 0..<40 {
                let r = try c.command("room.join", ["roomId": "flood\(i)", "mode": "enter"])
                if r["ok"] != nil { created += 1 } else {
                    #expect(r.obj("error").int("code") == ErrorCode.limitExceeded.rawValue)
                    refused += 1
                    continue
                }
                for _ in 0..<100 {
                    let r = try? c.command("room.send", ["roomId": "flood\(i)", "content": content])
                    if r?["ok"] != nil { sent += 1 } else { notSent.append(r.map { "\($0.obj("error").int("code") ?? 0)" } ?? "no answer") }
                }
            }
            let grown = Self.rssKiB(pid) - before
            print("memory bound: RSS grew by \(grown) KiB for \(sent) messages in \(created) rooms")
            // Created: at most the per-minute quota (one was spent on the warm-up room), plus what
            // it refilled meanwhile (a loaded machine takes more than a minute for all of this).
            let quota = Limits.defaultRoomCreatesPerUserPerMinute
            let refilled = Int(Date().timeIntervalSince(started) / 60 * Double(quota))
            #expect(created <= quota - 1 + refilled && refused > 0, "created \(created), refilled \(refilled)")
            #expect(sent >= 100 * created - 1, "not sent: \(notSent)")
            // 100 messages of 16 KiB (1.6 MiB of content) arrived per room; memory holds at most
            // 64 KiB of it per room as history and 1 MiB as the room's resume window on the hub,
            // plus a fixed allowance for the store's page caches and the allocator (12 MiB): about
            // 21.6 MiB for the quota's nine rooms. Keeping every message would add 14 MiB to the
            // 12.8-15.2 MiB measured here (17.2 MiB on a loaded machine).
            let perRoomKiB = (Limits.historyMemoryBytesPerRoom + ResumeWindow.defaultMaxBytes) / 1024
            let bound = perRoomKiB * max(created, quota - 1) + 12 * 1024
            #expect(grown < bound, "RSS grew by \(grown) KiB for \(sent) messages in \(created) rooms")
            // All of it is on disk and can be read back.
            let history = try g.rest().call("GET", "/v1/rooms/flood0/messages?limit=100")
            #expect((history.json["messages"] as? [Any])?.count == 100)
        }
    }

    /// Runs a command (mount, umount); true when it exits 0.
    @discardableResult
    static func run(_ path: String, _ args: [String]) -> Bool {
        guard let p = try? RunningProcess(path: path, arguments: args) else { return false }
        return p.waitForExit(timeout: 30) == 0
    }

    /// Whether this machine lets the tests mount a small tmpfs (root, as in CI).
    static let canMountTmpfs: Bool = {
        let dir = temporaryDirectory("roomcast-tmpfs-probe")
        guard run("/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", dir]) else { return false }
        return run("/bin/umount", [dir])
    }()

    static func freeBytes(_ path: String) -> Int {
        var s = statvfs()
        guard statvfs(path, &s) == 0 else { return 0 }
        return Int(s.f_bavail) * Int(s.f_frsize)
    }

    // Audit item 4: a full disk used to stop the whole gateway (exit 75), and again after every
    // restart. Now the failed commit fails only its own changes, the node turns read-only (503,
    // 50301, Retry-After; /readyz says so; reads and health keep working), clients are closed with
    // 1013 to reconnect, nothing acknowledged is lost, and writes resume by themselves.
    @Test(.enabled(if: HardeningTests.canMountTmpfs, "needs root to mount a small tmpfs"))
    func aFullDiskTurnsTheNodeReadOnlyAndWritesResume() async throws {
        try await offPool { () throws in
            let mountPoint = temporaryDirectory("roomcast-full-disk")
            #expect(Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=6m", "tmpfs", mountPoint]))
            defer { Self.run("/bin/umount", ["-l", mountPoint]) }
            let g = try GatewayProcess(dataDirectory: mountPoint + "/data")
            defer { g.stop() }
            let rest = g.rest()
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            let watcher = try g.client("watcher")
            _ = try watcher.expectOK(try watcher.command("room.join", ["roomId": "r"]))
            // Leave a little space, then write until a commit fails.
            let filler = mountPoint + "/filler"
            let keep = 256 * 1024
            _ = FileManager.default.createFile(atPath: filler, contents: Data(count: max(0, Self.freeBytes(mountPoint) - keep)))
            var acknowledged: [String] = []
            var refusal: RESTClient.Response?
            for i in 0..<400 {
                let content = "ack\(i)-" + String(repeating: "x", count: 8000)
                let r = try rest.call("POST", "/v1/rooms/r/messages", ["content": content])
                if r.status == 201 { acknowledged.append("ack\(i)-") } else {
                    refusal = r
                    break
                }
            }
            let refused = try #require(refusal, "the disk never filled")
            #expect(refused.status == 503 && refused.json.int("code") == ErrorCode.storageUnavailable.rawValue, "\(refused.text)")
            #expect(refused.header("Retry-After") != nil)
            // Read-only: health and reads work, writes are refused, readiness says why.
            #expect(try rest.call("GET", "/healthz", headers: []).status == 200)
            let ready = try rest.call("GET", "/readyz", headers: [])
            #expect(ready.status == 503 && ready.text.contains("read-only"))
            // OP-4: what the RoomcastStoreReadOnly alert watches.
            #expect(try rest.call("GET", "/metrics", headers: []).text.contains("\nroomcast_store_writable 0\n"))
            #expect(try rest.call("GET", "/v1/rooms/r").status == 200)
            let again = try rest.call("POST", "/v1/rooms", ["roomId": "while-full"])
            #expect(again.status == 503 && again.json.int("code") == ErrorCode.storageUnavailable.rawValue)
            // The watcher was told to reconnect.
            var code: UInt16?
            while let frame = try? watcher.ws.readFrame(timeout: 5) {
                if case .close(let c, _) = frame { code = c; break }
            }
            #expect(code == CloseCode.tryAgainLater.rawValue)
            // Space returns: writes resume by themselves.
            try FileManager.default.removeItem(atPath: filler)
            var resumed = false
            for _ in 0..<50 where !resumed {
                usleep(200_000)
                resumed = try rest.call("POST", "/v1/rooms/r/messages", ["content": "after"]).status == 201
            }
            #expect(resumed)
            #expect(try rest.call("GET", "/readyz", headers: []).status == 200)
            #expect(try rest.call("GET", "/metrics", headers: []).text.contains("\nroomcast_store_writable 1\n"))
            // Nothing acknowledged was lost.
            let history = try rest.call("GET", "/v1/rooms/r/messages?order=asc&limit=100")
            let stored = (history.json["messages"] as? [[String: Any]] ?? []).compactMap { $0["content"] as? String }
            for prefix in acknowledged.prefix(99) { #expect(stored.contains { $0.hasPrefix(prefix) }, "\(prefix) was acknowledged but is gone") }
            #expect(!stored.contains { $0.hasPrefix("ack\(acknowledged.count)-") }, "the refused message must not be stored")
            let reconnected = try g.client("watcher")
            _ = try reconnected.expectOK(try reconnected.command("room.join", ["roomId": "r"]))
        }
    }
}
