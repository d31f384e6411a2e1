import Crypto
import Foundation
import Testing
import TestKit
import Wire
#if canImport(Glibc)
import Glibc
#endif

/// What the built `roomcast` writes (OP-4, and a newcomer's first start): JSON log lines with
/// stable keys and never a credential; per-subsystem levels; the start-up output.
@Suite("Logs and start-up output end to end (OP-4)")
struct LoggingEndToEndTests {
    static let operatorToken = "operator-token-never-logged-0123"
    static let subsystems: Set<String> = ["server", "gateway", "engine", "store", "webhooks", "cluster", "reactor", "roomcast"]
    static let levels: Set<String> = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    /// The JSON objects among the lines of `log` (the process's standard output is mixed in).
    func jsonLines(_ log: String) -> [[String: Any]] {
        log.split(separator: "\n").filter { $0.hasPrefix("{") }.compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
    }

    // OP-4: at the most verbose level, with signed calls in all three schemes, tokens minted and
    // used, a webhook endpoint made, refusals, an operator rotating a secret: every log line is
    // one JSON object with time, level, subsystem, label and message, and no secret, signature,
    // token or operator credential appears anywhere in the output.
    @Test func jsonLogsHaveStableKeysAndNeverACredential() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess(extra: ["--log-format", "json", "--log-level", "trace", "--operator-token", Self.operatorToken])
            defer { g.stop() }
            var forbidden = [g.secret, Self.operatorToken]
            let rest = g.rest()

            // RongCloud, NIM and native signatures.
            let rc = rest.signatureHeaders()
            forbidden.append(rc.first { $0.0 == "Signature" }!.1)
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "logged"], headers: rc).status == 201)
            let ts = String(Int64(Date().timeIntervalSince1970))
            let nimSum = Signing.sha1(secret: g.secret, nonce: "nim-nonce-1", timestamp: ts)
            forbidden.append(nimSum)
            #expect(try rest.call("GET", "/v1/rooms/logged", headers: [("AppKey", g.appKey), ("Nonce", "nim-nonce-1"), ("CurTime", ts),
                                                                      ("CheckSum", nimSum)]).status == 200)
            let body = Array(#"{"content":"hi"}"#.utf8)
            let native = Signing.native(secret: g.secret, method: "POST", target: "/v1/rooms/logged/messages", timestamp: ts, nonce: "native-1", body: body)
            forbidden.append(native)
            #expect(try rest.call("POST", "/v1/rooms/logged/messages", bytes: body, headers: [("X-Roomcast-Key", g.appKey), ("X-Roomcast-Timestamp", ts),
                                                                                              ("X-Roomcast-Nonce", "native-1"), ("X-Roomcast-Signature", native)]).status == 201)
            // A refused signature, a replayed nonce.
            #expect(try rest.call("GET", "/v1/settings", headers: [("App-Key", g.appKey), ("Nonce", "bad-1"), ("Timestamp", ts),
                                                                  ("Signature", "0123456789abcdef0123456789abcdef01234567")]).status == 401)
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "logged"], headers: rc).status == 401)

            // Tokens minted and used; a bad token.
            let token = try rest.token("alice", nickname: "Alice")
            forbidden.append(token)
            forbidden.append(String(token.split(separator: ".").last!))
            let alice = try ProtocolClient(port: g.port)
            try alice.connect(token: token)
            _ = try alice.expectOK(try alice.command("room.join", ["roomId": "logged"]))
            _ = try alice.expectOK(try alice.command("room.send", ["roomId": "logged", "content": "from alice"]))
            let forged = try ProtocolClient(port: g.port)
            _ = try? forged.command("connect", ["token": String(token.dropLast(4)) + "AAAA"], timeout: 2)

            // A webhook endpoint's secret; an operator rotating the app's secret.
            let hook = try rest.call("POST", "/v1/webhooks", ["url": "https://hooks.example.com/x"])
            forbidden.append(try #require(hook.json.obj("endpoint").str("secret")))
            let rotated = try rest.call("POST", "/v1/admin/apps/\(g.appKey)/rotate-secret", headers: [("Authorization", "Bearer \(Self.operatorToken)")])
            forbidden.append(try #require(rotated.json.obj("app").str("secret")))
            #expect(try rest.call("GET", "/v1/admin/apps", headers: [("Authorization", "Bearer wrong-\(Self.operatorToken)")]).status == 401)
            forbidden.append("wrong-\(Self.operatorToken)")

            try alice.ws.close()
            try? forged.ws.close()
            g.process.signal(SIGTERM)
            let (status, log) = g.process.finish(timeout: 20)
            #expect(status == 0)
            let lines = jsonLines(log)
            #expect(lines.count >= 5, "\(log)")
            #expect(lines.contains { $0["message"] as? String == "operator: app secret rotated" && $0["app"] as? String == g.appKey && $0["request_id"] is String })
            for line in lines {
                for key in ["time", "level", "subsystem", "label", "message"] { #expect(line[key] is String, "\(key) in \(line)") }
                #expect(Self.levels.contains(line["level"] as? String ?? ""))
                #expect(Self.subsystems.contains(line["subsystem"] as? String ?? ""), "\(line)")
                let time = ISO8601DateFormatter()
                time.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
                #expect((line["time"] as? String).flatMap { time.date(from: $0) } != nil, "\(line)")
            }
            for text in log.split(separator: "\n") where !text.hasPrefix("{") {
                #expect(text.hasPrefix("roomcast listening on") || text.hasPrefix("  console:") || text.hasPrefix("  apps:"), "not a JSON line: \(text)")
            }
            for secret in forbidden { #expect(!log.contains(secret), "a credential reached the output: \(secret.prefix(8))…") }
        }
    }

    // OP-4: levels per subsystem: `error,gateway=notice` writes the gateway's notices and none
    // of the server's info lines.
    @Test func logLevelsPerSubsystem() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess(extra: ["--log-format", "json", "--log-level", "error,gateway=notice", "--operator-token", Self.operatorToken])
            defer { g.stop() }
            #expect(try g.rest().call("POST", "/v1/admin/apps", ["key": "levels"], headers: [("Authorization", "Bearer \(Self.operatorToken)")]).status == 201)
            g.process.signal(SIGTERM)
            let lines = jsonLines(g.process.finish(timeout: 20).log)
            #expect(lines.contains { $0["message"] as? String == "operator: app added" && $0["subsystem"] as? String == "gateway" })
            #expect(!lines.contains { $0["subsystem"] as? String == "server" }, "the server's info lines are below error")
            #expect(!lines.contains { $0["subsystem"] as? String == "roomcast" && $0["level"] as? String == "info" })
            let bad = try roomcastCommand(["--log-level", "store=loud", "--port", "0"])
            #expect(bad.status != 0 && bad.output.contains("unknown level 'loud'"))
            let unknown = try roomcastCommand(["--log-level", "disk=debug", "--port", "0"])
            #expect(unknown.status != 0 && unknown.output.contains("unknown subsystem 'disk'"))
        }
    }

    // The first start on an empty directory prints the development app, a signed curl that runs
    // in a POSIX sh (no bash-only $RANDOM) and creates a room, the console's URL and how to list
    // the apps and see a secret again — and that command does show it.
    @Test func firstStartPrintsWhatANewcomerNeeds() async throws {
        try await offPool { () throws in
            let data = temporaryDirectory("roomcast-first-start")
            defer { try? FileManager.default.removeItem(atPath: data) }
            let p = try RunningProcess(path: try productPath("roomcast"), arguments: ["--port", "0", "--data-dir", data, "--log-level", "warning"])
            defer { p.kill9() }
            let port = try p.waitForPort()
            let out = try p.waitForOutput("  apps:")
            #expect(out.contains("  console: http://127.0.0.1:\(port)/console/"))
            #expect(out.contains("roomcast apps list --data-dir \(data)"))
            let lines = out.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let key = try #require(lines.first { $0.contains("App-Key:") }?.split(separator: " ").last.map(String.init))
            let secret = try #require(lines.first { $0.contains("App-Secret:") }?.split(separator: " ").last.map(String.init))
            let start = try #require(lines.firstIndex { $0.hasPrefix("Create a room with a signed request") })
            let snippet = lines[(start + 1)...].prefix { !$0.isEmpty }.joined(separator: "\n")
            #expect(!snippet.contains("RANDOM"))
            let sh = try RunningProcess(path: "/bin/sh", arguments: ["-c", snippet])
            let (status, answer) = sh.finish(timeout: 20)
            #expect(status == 0)
            #expect(answer.contains(#""roomId":"lobby""#), "\(snippet)\n->\n\(answer)")
            let listed = try roomcastCommand(["apps", "list", "--secrets", "--data-dir", data])
            #expect(listed.output.contains("\(key)  active  origin=dev") && listed.output.contains("secret=\(secret)"))
        }
    }
}
