import Foundation
@testable import Gateway
import Store
import Synchronization
import Testing
import TestKit
import Wire

/// The operator API and app secrets (OP-2), in-process: the real routes, authenticator, sessions
/// and apps watcher over an in-memory store, on a manual clock (a rotation's 24 h grace is passed
/// without sleeping).
@Suite("Operator API in-process (OP-1, OP-2)")
struct OperatorAPITests {
    static let token = "operator-token-for-tests-0123"

    /// A gateway with the operator API on (unless `token` is nil) and its watcher running.
    func gateway(token: String? = OperatorAPITests.token) throws -> InProcessGateway {
        let counter = Atomic<Int>(0)
        let g = try InProcessGateway { c in
            c.operations.operatorToken = token
            c.operations.makeSecret = { "generated-secret-\(counter.add(1, ordering: .relaxed).newValue)-abcdef" }
        }
        return g
    }

    func admin(_ g: InProcessGateway, _ method: String, _ path: String, _ body: Any? = nil, token: String? = OperatorAPITests.token) throws -> RESTClient.Response {
        try g.rest().call(method, path, body, headers: token.map { [("Authorization", "Bearer \($0)")] } ?? [])
    }

    func generation(_ g: InProcessGateway) throws -> Int64 { try g.core.store.operatorAppsGeneration() }

    // OP-2: without a configured operator token every operator call is refused (403, 40310);
    // a missing or wrong token gets 401 (40110) with WWW-Authenticate; app secrets are not
    // operator credentials; nothing changes.
    @Test func operatorCredentialGuardsEveryCall() throws {
        let off = try gateway(token: nil)
        defer { off.stop() }
        for (method, path) in [("GET", "/v1/admin/apps"), ("POST", "/v1/admin/apps"), ("POST", "/v1/admin/backup"),
                               ("DELETE", "/v1/admin/apps/testapp"), ("POST", "/v1/admin/apps/testapp/rotate-secret")] {
            let r = try admin(off, method, path, ["key": "x"], token: "anything-at-all-123456")
            #expect(r.status == 403 && r.json.int("code") == 40310, "\(method) \(path): \(r.text)")
        }

        let g = try gateway()
        defer { g.stop() }
        let before = try generation(g)
        for token in [nil, "wrong-token-wrong-token", OperatorAPITests.token + "x", String(OperatorAPITests.token.dropLast()), g.secret] {
            let r = try admin(g, "POST", "/v1/admin/apps", ["key": "intruder"], token: token)
            #expect(r.status == 401 && r.json.int("code") == 40110, "\(token ?? "none"): \(r.text)")
            #expect(r.header("WWW-Authenticate") == #"Bearer realm="roomcast-operator""#)
        }
        // A signed app call is not an operator call either.
        #expect(try g.rest().call("GET", "/v1/admin/apps").json.int("code") == 40110)
        #expect(try generation(g) == before)
        #expect(try g.core.store.app("intruder") == nil)
        let listed = try admin(g, "GET", "/v1/admin/apps")
        #expect(listed.status == 200)
        let keys = (listed.json["apps"] as? [[String: Any]] ?? []).compactMap { $0.str("key") }
        #expect(Set(keys) == [g.appKey, InProcessGateway.otherApp.key])
        #expect(!listed.text.contains(g.secret), "a listing never carries secrets")
    }

    // OP-2: an app added through the operator API serves at once (signed calls, tokens,
    // connections), with the secret it was given.
    @Test func addedAppServesAtOnce() throws {
        let g = try gateway()
        defer { g.stop() }
        let added = try admin(g, "POST", "/v1/admin/apps", ["key": "acme"])
        #expect(added.status == 201)
        let secret = try #require(added.json.obj("app").str("secret"))
        #expect(secret == "generated-secret-1-abcdef")
        #expect(added.json.obj("app").str("status") == "active")
        let acme = g.rest(app: "acme", secret: secret)
        let made = try acme.call("POST", "/v1/rooms", ["roomId": "lobby"])
        #expect(made.status == 201, "\(made.text)")
        let client = g.session()
        try client.connect(token: try acme.token("alice"))
        _ = try client.expectOK(try client.command("room.join", ["roomId": "lobby"]))
        #expect(client.closeCode == nil)
        // Its own secret can be given; the same key again is refused and changes nothing.
        let before = try generation(g)
        let again = try admin(g, "POST", "/v1/admin/apps", ["key": "acme", "secret": "another-secret-0123456"])
        #expect(again.status == 409 && again.json.int("code") == 40902)
        #expect(try g.core.store.app("acme")?.secret == secret)
        #expect(try generation(g) == before)
    }

    // OP-2: bad input gets a stable code and changes nothing.
    @Test func badInputChangesNothing() throws {
        let g = try gateway()
        defer { g.stop() }
        let before = try generation(g)
        let apps = try g.core.store.operatorApps().apps
        let cases: [(String, String, Any?, Int, Int)] = [
            ("POST", "/v1/admin/apps", ["key": "bad key"], 400, 1002),
            ("POST", "/v1/admin/apps", ["key": String(repeating: "k", count: 65)], 400, 1002),
            ("POST", "/v1/admin/apps", ["key": "short", "secret": "tooshort"], 400, 1002),
            ("POST", "/v1/admin/apps", [:] as [String: Any], 400, 1002),
            ("POST", "/v1/admin/apps/nosuchapp/rotate-secret", nil, 404, 40410),
            ("POST", "/v1/admin/apps/nosuchapp/disable", nil, 404, 40410),
            ("POST", "/v1/admin/apps/nosuchapp/enable", nil, 404, 40410),
            ("DELETE", "/v1/admin/apps/nosuchapp", nil, 404, 40410),
            ("GET", "/v1/admin/apps/nosuchapp", nil, 404, 40410),
            ("POST", "/v1/admin/apps/testapp/rotate-secret", ["secret": g.secret], 400, 1002),
        ]
        for (method, path, body, status, code) in cases {
            let r = try admin(g, method, path, body)
            #expect(r.status == status && r.json.int("code") == code, "\(method) \(path): \(r.text)")
        }
        let notJSON = try g.rest().call("POST", "/v1/admin/apps", bytes: Array("{key:".utf8),
                                        headers: [("Authorization", "Bearer \(OperatorAPITests.token)")])
        #expect(notJSON.status == 400 && notJSON.json.int("code") == 40000)
        #expect(try generation(g) == before)
        #expect(try g.core.store.operatorApps().apps == apps)
        #expect(try g.rest().call("GET", "/v1/settings").status == 200, "the app still serves with its secret")
    }

    // OP-2: a rotated secret keeps the old one valid for 24 h: signatures and client tokens made
    // with either are accepted until then, only the new one after.
    @Test func rotatedSecretKeepsTheOldOneForItsGrace() throws {
        let g = try gateway()
        defer { g.stop() }
        let old = g.secret
        let rotated = try admin(g, "POST", "/v1/admin/apps/\(g.appKey)/rotate-secret")
        #expect(rotated.status == 200)
        let new = try #require(rotated.json.obj("app").str("secret"))
        #expect(new != old)
        #expect(rotated.json.obj("app")["rotating"] as? Bool == true)
        #expect(Int64(rotated.json.obj("app").int("previousSecretExpiresAt") ?? 0) == g.clock.now + 24 * 3600 * 1000)
        let oldToken = ClientToken.mint(TokenClaims(sub: "olduser", app: g.appKey, exp: g.clock.seconds + 3 * 86_400), secret: old)
        let newToken = ClientToken.mint(TokenClaims(sub: "newuser", app: g.appKey, exp: g.clock.seconds + 3 * 86_400), secret: new)

        // Within the grace: both secrets sign calls, both mint accepted tokens; tokens the
        // gateway mints now are signed with the new one.
        #expect(try g.rest(secret: old).call("GET", "/v1/settings").status == 200)
        #expect(try g.rest(secret: new).call("GET", "/v1/settings").status == 200)
        let minted = try g.rest(secret: old).token("minted")
        #expect(ClientToken.verify(minted, secret: { _ in new }).isSuccess)
        for token in [oldToken, newToken] {
            let c = g.session()
            try c.connect(token: token)
            #expect(c.closeCode == nil)
        }

        g.advance(seconds: 24 * 3600 - 1)
        #expect(try g.rest(secret: old).call("GET", "/v1/settings").status == 200, "still within the grace")
        g.advance(seconds: 2)
        let refused = try g.rest(secret: old).call("GET", "/v1/settings")
        #expect(refused.status == 401 && refused.json.int("code") == 1004)
        #expect(try g.rest(secret: new).call("GET", "/v1/settings").status == 200)
        let late = g.session()
        #expect(throws: (any Error).self) { try late.connect(token: oldToken) }
        #expect(late.closeCode == 4004)
        let fresh = g.session()
        try fresh.connect(token: newToken)
        #expect(fresh.closeCode == nil)
    }

    // OP-2: a disabled app is refused (40311) and its connections closed (4004); another app is
    // untouched; enabling it serves it again with its data.
    @Test func disabledAppIsRefusedUntilEnabled() throws {
        let g = try gateway()
        defer { g.stop() }
        #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "kept"]).status == 201)
        let mine = try g.client("alice")
        let other = g.rest(app: InProcessGateway.otherApp.key, secret: InProcessGateway.otherApp.secret)
        let theirs = g.session()
        try theirs.connect(token: try other.token("bob"))

        #expect(try admin(g, "POST", "/v1/admin/apps/\(g.appKey)/disable").json.obj("app").str("status") == "disabled")
        g.settle()
        #expect(mine.closeCode == 4004)
        #expect(theirs.closeCode == nil)
        let refused = try g.rest().call("GET", "/v1/rooms/kept")
        #expect(refused.status == 403 && refused.json.int("code") == 40311)
        #expect(try other.call("GET", "/v1/settings").status == 200)

        #expect(try admin(g, "POST", "/v1/admin/apps/\(g.appKey)/enable").json.obj("app").str("status") == "active")
        #expect(try g.rest().call("GET", "/v1/rooms/kept").status == 200)
    }

    // OP-2: removing an app on a running node refuses it at once; its data goes at the next
    // start (StoreOperationsTests covers the deletion). Removing it again is refused (40911).
    @Test func removedAppIsRefusedAtOnce() throws {
        let g = try gateway()
        defer { g.stop() }
        let removed = try admin(g, "DELETE", "/v1/admin/apps/\(g.appKey)")
        #expect(removed.status == 200 && removed.json.str("removed") == g.appKey)
        #expect(try g.rest().call("GET", "/v1/settings").json.int("code") == 40311)
        let again = try admin(g, "DELETE", "/v1/admin/apps/\(g.appKey)")
        #expect(again.status == 409 && again.json.int("code") == 40911)
        #expect(try admin(g, "POST", "/v1/admin/apps", ["key": g.appKey]).json.int("code") == 40911)
    }

    // OP-1: the backup call writes under the data directory's backups folder with a name the
    // node chooses; a second call while one runs is refused (40912). An in-memory store's backup
    // is still a checked SQLite file.
    @Test func backupWritesUnderTheBackupDirectory() throws {
        let directory = temporaryDirectory("roomcast-admin-backup")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let g = try InProcessGateway { c in
            c.operations.operatorToken = OperatorAPITests.token
            c.dataDirectory = directory
        }
        defer { g.stop() }
        #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "in-backup"]).status == 201)
        let r = try admin(g, "POST", "/v1/admin/backup", ["file": "/etc/passwd"])
        #expect(r.status == 201, "\(r.text)")
        let file = try #require(r.json.obj("backup").str("file"))
        #expect(file.hasPrefix(directory + "/backups/roomcast-") && file.hasSuffix(".sqlite"))
        #expect(try StoreBackup.check(file).schemaVersion == SchemaVersion.current)
        #expect(r.json.obj("backup").int("schemaVersion") == SchemaVersion.current)
    }
}

extension Result {
    var isSuccess: Bool { if case .success = self { return true } else { return false } }
}
