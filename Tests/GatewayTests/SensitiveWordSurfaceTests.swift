import Chat
import Foundation
@testable import Gateway
import Testing
import TestKit
import Wire

/// MO-2 on the surfaces: the native word list, RongCloud's `/sensitiveword/*`, and what a client's
/// send gets — a blocked message refused with 21501 and received by nobody, a replaced one
/// delivered replaced — with bad input refused naming the field and changing nothing.
@Suite("Sensitive words on every surface (MO-2)")
struct SensitiveWordSurfaceTests {
    typealias J = [String: Any]

    func room(_ g: InProcessGateway) throws -> (alice: SessionClient, bob: SessionClient) {
        #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "7"]).status == 201)
        let alice = try g.client("alice"), bob = try g.client("bob")
        for c in [alice, bob] { _ = try c.expectOK(try c.command("room.join", ["roomId": "7"])) }
        g.settle()
        for c in [alice, bob] { _ = c.drain() }
        return (alice, bob)
    }

    func words(_ g: InProcessGateway) throws -> [J] {
        try g.rest().call("GET", "/v1/sensitive-words").json["words"] as? [J] ?? []
    }

    @Test("MO-2: the native list: add with and without a replacement, list, remove; a client's send is screened")
    func native() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let (alice, bob) = try room(g)
        let added = try g.rest().call("POST", "/v1/sensitive-words", ["words": [["word": "spam", "replacement": "****"], ["word": "forbidden"]]])
        #expect(added.status == 200, "\(added.text)")
        let list = try words(g)
        #expect(list.map { $0.str("word") ?? "" } == ["spam", "forbidden"] && list.map { $0.str("type") ?? "" } == ["replace", "block"])
        #expect(try g.rest().call("GET", "/v1/settings").json.int("sensitiveWordCount") == 2)

        let blocked = try alice.command("room.send", ["roomId": "7", "content": "so FORBIDDEN"])
        let e = blocked["error"] as? J
        #expect(e?.int("code") == 21501 && e?.str("field") == "content", "\(blocked)")
        g.settle()
        #expect(!bob.drain().contains { $0.str("ev") == "room.message" }, "nobody receives a blocked message")
        let ok = try alice.expectOK(try alice.command("room.send", ["roomId": "7", "content": "no spam here"]))
        #expect(ok.obj("message").str("content") == "no **** here")
        #expect(try bob.waitFor("room.message").obj("data").obj("message").str("content") == "no **** here")
        // The app server is not screened unless the app asks.
        #expect(try g.rest().call("POST", "/v1/rooms/7/messages", ["content": "forbidden"]).status == 201)
        #expect(try g.rest().call("PATCH", "/v1/settings", ["sensitiveWordsOnServerSends": true]).status == 200)
        let refused = try g.rest().call("POST", "/v1/rooms/7/messages", ["content": "forbidden"])
        #expect(refused.status == 403 && refused.json.int("code") == 21501 && refused.json.str("field") == "content", "\(refused.text)")

        #expect(try g.rest().call("DELETE", "/v1/sensitive-words?words=forbidden,unknown").status == 200)
        #expect(try words(g).map { $0.str("word") ?? "" } == ["spam"])
        _ = try alice.expectOK(try alice.command("room.send", ["roomId": "7", "content": "forbidden is fine now"]))
    }

    @Test("MO-2: bad native input is refused with 400 1002 naming the field, and the list is unchanged")
    func nativeBadInput() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        #expect(try g.rest().call("POST", "/v1/sensitive-words", ["words": [["word": "keep"]]]).status == 200)
        let long = String(repeating: "词", count: Limits.maxSensitiveWordChars + 1)
        let cases: [(Any, String)] = [
            (["words": [["word": long]]], "word"),
            (["words": [["word": "two words"]]], "word"),
            (["words": [["word": "ok", "replacement": long]]], "replacement"),
            (["words": (0...Limits.maxSensitiveWordsPerCall).map { ["word": "w\($0)"] }], "words"),
            (["words": []], "words"),
        ]
        for (body, field) in cases {
            let r = try g.rest().call("POST", "/v1/sensitive-words", body)
            #expect(r.status == 400 && r.json.int("code") == 1002 && r.json.str("field") == field, "\(field): \(r.text)")
        }
        let empty = try g.rest().call("DELETE", "/v1/sensitive-words?words=")
        #expect(empty.status == 400 && empty.json.str("field") == "words", "\(empty.text)")
        #expect(try words(g).map { $0.str("word") ?? "" } == ["keep"])
    }

    @Test("MO-2: RongCloud's /sensitiveword/add, list (type 0, 1, 2), delete and batch/delete")
    func rongCloud() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let (alice, bob) = try room(g)
        func rc(_ path: String, _ form: [(String, String)]) throws -> RESTClient.Response { try g.rest().vendor(.rongCloud, path, form) }
        #expect(try rc("/sensitiveword/add.json", [("word", "spam"), ("replaceWord", "***")]).json.int("code") == 200)
        #expect(try rc("/sensitiveword/add.json", [("word", "forbidden")]).json.int("code") == 200)
        #expect(try rc("/sensitiveword/add.json", [("word", "gone")]).json.int("code") == 200)
        func listed(_ type: String?) throws -> [J] {
            try rc("/sensitiveword/list.json", type.map { [("type", $0)] } ?? []).json["words"] as? [J] ?? []
        }
        #expect(try listed(nil).map { $0.str("word") ?? "" } == ["forbidden", "gone"], "the default lists blocking words")
        let replaced = try listed("0")
        #expect(replaced.map { $0.str("word") ?? "" } == ["spam"] && replaced.first?.str("replaceWord") == "***" && replaced.first?.str("type") == "0")
        #expect(try listed("2").count == 3)
        let badType = try rc("/sensitiveword/list.json", [("type", "3")])
        #expect(badType.json.int("code") == 1002 && badType.json.str("field") == "type")
        let badWord = try rc("/sensitiveword/add.json", [("word", String(repeating: "x", count: Limits.maxSensitiveWordChars + 1))])
        #expect(badWord.status == 400 && badWord.json.int("code") == 1002 && badWord.json.str("field") == "word", "\(badWord.text)")
        let badReplacement = try rc("/sensitiveword/add.json", [("word", "ok"), ("replaceWord", String(repeating: "x", count: Limits.maxSensitiveWordChars + 1))])
        #expect(badReplacement.json.str("field") == "replaceWord", "\(badReplacement.text)")
        let tooMany = try rc("/sensitiveword/batch/delete.json", (0...Limits.maxSensitiveWordsPerRongCloudBatch).map { ("words", "w\($0)") })
        #expect(tooMany.json.int("code") == 1002 && tooMany.json.str("field") == "words")
        #expect(try listed("2").count == 3, "refused calls change nothing")

        let blocked = try alice.command("room.send", ["roomId": "7", "content": "forbidden"])
        #expect((blocked["error"] as? J)?.int("code") == 21501)
        #expect(try rc("/sensitiveword/delete.json", [("word", "gone")]).json.int("code") == 200)
        #expect(try rc("/sensitiveword/batch/delete.json", [("words", "forbidden"), ("words", "unknown")]).json.int("code") == 200)
        #expect(try listed("2").map { $0.str("word") ?? "" } == ["spam"])
        _ = try alice.expectOK(try alice.command("room.send", ["roomId": "7", "content": "forbidden spam"]))
        #expect(try bob.waitFor("room.message").obj("data").obj("message").str("content") == "forbidden ***")
    }
}
