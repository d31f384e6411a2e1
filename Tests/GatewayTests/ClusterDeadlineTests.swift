import Chat
import Engine
import Foundation
import Logging
import Store
import Synchronization
import Testing
import Replication

/// CLUSTER.md "A change": a caller whose entry does not come back from the log within
/// `Limits.clusterAnswerDeadlineMilliseconds` is answered 50303 (the change may have been made),
/// not kept waiting for as long as PostgreSQL or the way to it stalls; the entry, if it comes back
/// later, is applied as usual and answers no one twice (BX-5, CL-3).
@Suite("Cluster engine: the answer deadline")
struct ClusterDeadlineTests {
    @Test func aCallerIsNotKeptWaitingPastTheDeadline() throws {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let store = try Store(inMemory: logger)
        let log = ClusterEngineTests.CapturingLog(origin: "n1#r1", incarnation: 1)
        let ids = log.traits.ids
        let now = Atomic<Int64>(1_800_000_000_000)
        let domain = ChatDomain(makeID: { ids.next() })
        _ = domain.apply(.configureApp(app: "app", AppSettings()), now: 0)
        try store.upsertApp(key: "app", secret: "secret", origin: "config", settings: AppSettings(), now: 0)
        let engine = try Engine(domain: domain, store: store, log: log, publisher: Publisher(sink: ClusterEngineTests.RecordingSink(.init())),
                                webhooks: nil, clock: { now.load(ordering: .relaxed) },
                                retention: .init(maxEvents: 100, maxAgeMilliseconds: 60_000),
                                reload: { ChatDomain(makeID: { ids.next() }) }, logger: logger)
        store.start()
        engine.start()
        defer {
            engine.stop()
            store.stop()
        }
        let first = ClusterEngineTests.Answer(), second = ClusterEngineTests.Answer()
        // Each submit is appended (on the engine's thread) before the clock moves on.
        var appended: [(seq: UInt64, payload: [UInt8])] = []
        func waitAppended(_ n: Int) {
            for _ in 0..<2000 where appended.count < n {
                appended += log.take()
                usleep(1_000)
            }
        }
        engine.submit(.createRoom(app: "app", RoomConfig(roomId: "r1")), replyTo: .callback { first.set($0) })
        waitAppended(1)
        now.add(Limits.clusterAnswerDeadlineMilliseconds / 2, ordering: .relaxed)
        engine.submit(.createRoom(app: "app", RoomConfig(roomId: "r2")), replyTo: .callback { second.set($0) })
        waitAppended(2)
        // Both were appended; neither comes back. Just before the first one's deadline: no answer.
        #expect(appended.count == 2)
        now.add(Limits.clusterAnswerDeadlineMilliseconds / 2 - 1, ordering: .relaxed)
        engine.tick()
        usleep(50_000)
        #expect(first.peek == nil && second.peek == nil)
        // Past it: the first is answered 50303; the second, younger, still waits.
        now.add(2, ordering: .relaxed)
        engine.tick()
        #expect(first.code == ErrorCode.outcomeUnknown.rawValue)
        usleep(50_000)
        #expect(second.peek == nil)
        // The first entry comes back after all: applied (the room exists), its caller not answered again.
        engine.apply(entries: [LogEntry(position: 1, origin: "n1#r1", seq: appended[0].seq, at: now.load(ordering: .relaxed),
                                               payload: appended[0].payload)])
        engine.apply(entries: [LogEntry(position: 2, origin: "n1#r1", seq: appended[1].seq, at: now.load(ordering: .relaxed),
                                               payload: appended[1].payload)])
        #expect(second.wait() != nil)
        if case .success = second.wait() {} else { Issue.record("the second change, back in time, is answered as made") }
        #expect(first.code == ErrorCode.outcomeUnknown.rawValue)
    }
}
