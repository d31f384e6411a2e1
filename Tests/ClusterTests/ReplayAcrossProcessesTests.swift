import Foundation
import Testing
import TestKit

/// CL-2's premise across processes (CLUSTER.md): nodes are separate processes, and Swift seeds
/// its hashing per process, so the domain must let no `Dictionary` or `Set` order reach an
/// outcome. Two runs of `chat-bench --replay` apply the same 3,000 pseudo-random entries (through
/// the log codec, ids from the entries) and must print the same replies, events, audiences,
/// mutations and webhook records.
@Suite("Replay across processes")
struct ReplayAcrossProcessesTests {
    static func replay(seed: Int) throws -> [String] {
        // Read to the end of its output (it starts no children), then wait for it.
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try productPath("chat-bench"))
        p.arguments = ["--replay", "3000", String(seed)]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw TestKitError.protocolError("chat-bench --replay failed: \(text)") }
        return text.split(separator: "\n").map(String.init)
    }

    @Test func twoProcessesReplayingTheSameLogAgree() throws {
        // With deterministic hashing forced, both processes would share a seed and prove nothing.
        #expect(ProcessInfo.processInfo.environment["SWIFT_DETERMINISTIC_HASHING"] == nil)
        let first = try Self.replay(seed: 7), second = try Self.replay(seed: 7)
        #expect(first.count == 3005)
        #expect(first == second)
        // A real mix: accepted and refused commands, events delivered.
        #expect(first.filter { $0.contains(" success(") }.count > 1000 && first.filter { $0.contains(" failure(") }.count > 500)
        #expect(first.contains { $0.contains("Chat.Effect.deliver(") })
        // Another seed is another log (the check is not comparing constants).
        #expect(try Self.replay(seed: 8) != first)
    }
}
