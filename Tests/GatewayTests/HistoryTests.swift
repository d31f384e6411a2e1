import Chat
import Foundation
@testable import Gateway
import Testing
import TestKit
import Wire

/// NIM-8 history beyond the in-memory window comes from disk: the same answers, whatever part of
/// the history memory still holds (in-process, with the real store).
@Suite("History beyond the in-memory window")
struct HistoryTests {
    @Test func historyBeyondTheMemoryWindowIsReadFromTheStore() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "h"]).status == 201)
        let ann = try g.client("ann")
        _ = try ann.expectOK(try ann.command("room.join", ["roomId": "h"]))
        let total = Limits.historyMemoryMessagesPerRoom * 2 + 7
        for i in 0..<total {
            g.clock.advance(seconds: 1)
            #expect(try rest.call("POST", "/v1/rooms/h/messages", ["content": "m\(i)", "type": i % 3 == 0 ? "custom" : "text"]).status == 201)
        }
        func contents(_ query: String) throws -> [String] {
            let r = try rest.call("GET", "/v1/rooms/h/messages?\(query)")
            #expect(r.status == 200, "\(r.text)")
            return (r.json["messages"] as? [[String: Any]] ?? []).compactMap { $0["content"] as? String }
        }
        // Newest first: the first page is in memory, the rest on disk, seamlessly.
        let newest = try contents("limit=100")
        #expect(newest == (total - 100..<total).reversed().map { "m\($0)" })
        // Oldest first from the beginning: only on disk.
        #expect(try contents("order=asc&limit=5") == (0..<5).map { "m\($0)" })
        // Kinds are filtered on disk as in memory.
        let custom = try contents("order=asc&limit=100&types=custom")
        #expect(custom == stride(from: 0, to: total, by: 3).prefix(100).map { "m\($0)" })
        // A member asks the same over the WebSocket.
        let ok = try ann.expectOK(try ann.command("room.history", ["roomId": "h", "limit": 100, "order": "asc"]))
        #expect((ok["messages"] as? [[String: Any]])?.count == 100)
        #expect((ok["messages"] as? [[String: Any]])?.first?["content"] as? String == "m0")
    }
}
