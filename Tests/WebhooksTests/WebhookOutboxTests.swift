import Chat
import Dispatch
import GRDB
import Logging
import Store
import Synchronization
import Testing
@testable import Webhooks

@Suite("Webhook outbox in the outcome's transaction (SPEC §9)")
struct WebhookOutboxTests {
    let now: Int64 = 1_800_000_000_000

    func service(_ store: Store) -> WebhookService {
        WebhookService(store: store, logger: Logger(label: "roomcast.webhook-tests"), clock: { 1_800_000_000_000 }, random: { 0.5 },
                       makeID: { "x" + String(UInt64.random(in: 0...UInt64.max), radix: 16) }, appSecret: { _ in "secret" })
    }

    func wait(_ done: DispatchSemaphore) {
        #expect(done.wait(timeout: .now() + 30) == .success, "the store never answered")
    }

    // WH-4: `persist` writes the staged messages and their pending deliveries in the commit that
    // makes the outcome's mutations durable; both are there once it is.
    @Test func persistWritesTheOutboxWithTheMutations() throws {
        let store = try Store(inMemory: Logger(label: "roomcast.webhook-tests"))
        try store.upsertApp(key: "a", secret: "s", origin: "config", settings: AppSettings(), now: now)
        store.start()
        defer { store.stop() }
        let webhooks = service(store)

        let created = DispatchSemaphore(value: 0)
        let endpointId = Mutex<String?>(nil)
        webhooks.createEndpoint(app: "a", .init(url: "https://example.com/hook", events: ["room.created"])) { result in
            if case .success(let e) = result { endpointId.withLock { $0 = e.id } }
            created.signal()
        }
        wait(created)
        let id = try #require(endpointId.withLock { $0 })

        let record = WebhookRecord(app: "a", type: .roomCreated, roomId: "r", time: now)
        let other = WebhookRecord(app: "a", type: .messageSent, roomId: "r", time: now)
        var settings = AppSettings()
        settings.maxRooms = 2
        let durable = DispatchSemaphore(value: 0)
        let staged = Mutex<WebhookService.Staged?>(nil)
        store.submit(outcomeCommit(webhooks, mutations: [.putApp("a", settings)], records: [record, other]) { s in
            staged.withLock { $0 = s }
            durable.signal()
        })
        wait(durable)
        #expect(staged.withLock { $0?.messages.map(\.type) } == [.roomCreated])

        let (pending, json) = try store.database.read { db in (try WebhookDatabase.pending(owner: 0, db), try AppRow.fetchOne(db, key: "a")?.settings) }
        #expect(pending.map(\.endpointId) == [id])
        #expect(pending.map(\.message.type) == [.roomCreated])
        #expect(pending.map(\.message.roomId) == ["r"])
        #expect(json?.contains(#""maxRooms":2"#) == true)

        // No endpoint wants it: nothing is staged and the commit carries no outbox write.
        #expect(webhooks.stage([other]) == nil)
    }
}
