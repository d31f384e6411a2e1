import Chat
import Dispatch
import Foundation
import GRDB
import Logging
import Store
import Synchronization
import Testing
import TestKit
@testable import Webhooks

/// A store and a webhook service over it, delivering for real (libcurl) to receivers on loopback.
final class DeliveryHarness: Sendable {
    let store: Store
    let service: WebhookService

    /// `before` runs before the service starts (as the command line's `configure` does).
    init(_ configuration: WebhookService.Configuration, apps: [String], before: (Store, WebhookService) throws -> Void = { _, _ in }) throws {
        // Some of these tests make deliveries dead letters on purpose: the warnings say so.
        let logger = Logger(label: "roomcast.webhook-delivery-tests (expected: dead letters provoked on purpose)")
        store = try Store(inMemory: logger)
        for app in apps { try store.upsertApp(key: app, secret: "secret-\(app)", origin: "config", settings: AppSettings(), now: 0) }
        store.start()
        service = WebhookService(store: store, configuration: configuration, logger: logger,
                                 clock: { Int64(Date().timeIntervalSince1970 * 1000) }, random: { 0.5 },
                                 makeID: { String(UInt64.random(in: 0...UInt64.max), radix: 16) }, appSecret: { "secret-" + $0 })
        try before(store, service)
        try service.start()
    }

    func stop() {
        service.stop()
        store.stop()
    }

    /// Creates an endpoint through the API path (`createEndpoint`, as REST does).
    func create(_ app: String, _ spec: WebhookService.EndpointSpec) -> Result<WebhookEndpoint, ChatError> {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Result<WebhookEndpoint, ChatError>?>(nil)
        service.createEndpoint(app: app, spec) { r in
            result.withLock { $0 = r }
            done.signal()
        }
        _ = done.wait(timeout: .now() + 30)
        return result.withLock { $0 } ?? .failure(ChatError(.invalidParameter, "the store never answered"))
    }

    func update(_ app: String, _ id: String, _ spec: WebhookService.EndpointSpec) -> Result<WebhookEndpoint, ChatError> {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Result<WebhookEndpoint, ChatError>?>(nil)
        service.updateEndpoint(app: app, id: id, spec) { r in
            result.withLock { $0 = r }
            done.signal()
        }
        _ = done.wait(timeout: .now() + 30)
        return result.withLock { $0 } ?? .failure(ChatError(.invalidParameter, "the store never answered"))
    }

    /// An event of `app`, the way the engine commits one: outbox rows in the commit, then handed to
    /// the delivery thread once durable.
    func send(_ app: String, room: String) {
        let service = self.service
        store.submit(outcomeCommit(service, mutations: [], records: [WebhookRecord(app: app, type: .roomCreated, roomId: room, time: 0)]) { staged in
            if let staged { service.enqueue(staged) }
        })
    }

    func deliveries(_ endpointId: String) -> [DeliveryRecord] {
        (try? store.database.read { db in try WebhookDatabase.deliveries(endpointId: endpointId, status: nil, beforeSequence: nil, limit: 100, db) })?
            .map(\.0) ?? []
    }

    /// Polls the delivery log until `condition` holds.
    @discardableResult
    func waitFor(_ endpointId: String, timeout: Duration = .seconds(10), _ condition: ([DeliveryRecord]) -> Bool) -> [DeliveryRecord] {
        let deadline = ContinuousClock.now + timeout
        var log = deliveries(endpointId)
        while !condition(log) && ContinuousClock.now < deadline {
            usleep(10_000)
            log = deliveries(endpointId)
        }
        return log
    }
}

@Suite("Webhook delivery: egress per transfer, the operator's private list, fair slots (SPEC §9)")
struct WebhookDeliveryTests {
    // WH-5: libcurl keeps connections open and reuses them for any transfer to the same host and
    // port. A connection opened for an endpoint that may reach private addresses must not carry a
    // request of an endpoint that may not: the guard holds per transfer, not per connection.
    @Test func aReusedConnectionIsCheckedForEveryTransfer() async throws {
        try await offPool { () throws in
            let receiver = try LocalReceiver()
            defer { receiver.stop() }
            var c = WebhookService.Configuration()
            c.retry = RetrySchedule(delays: [50], jitter: 0)
            c.privateNetworkApps = ["a"]
            let h = try DeliveryHarness(c, apps: ["a", "b"])
            defer { h.stop() }
            // A name, so that the URL check at creation cannot refuse it: only the address can.
            let allowed = try h.create("a", .init(url: "http://localhost:\(receiver.port)/a", allowPrivateNetwork: true)).get()
            let guarded = try h.create("b", .init(url: "http://localhost:\(receiver.port)/b")).get()

            // App a's endpoint delivers twice over one connection (reuse is kept where it is allowed),
            // which then stays open in libcurl's cache.
            for i in 0..<2 {
                h.send("a", room: "a\(i)")
                #expect(receiver.wait { $0.count == i + 1 })
                h.waitFor(allowed.id) { $0.count == i + 1 && $0.allSatisfy { $0.status == .delivered } }
            }
            #expect(receiver.accepted == 1)

            // App b's endpoint to the same host and port: refused on the open connection too, then
            // dead after its retry, and the receiver never sees its request.
            h.send("b", room: "b0")
            let log = h.waitFor(guarded.id) { $0.first?.status == .dead }
            let d = try #require(log.first)
            #expect(d.status == .dead && d.attempts == 2)
            #expect(d.history.allSatisfy { $0.error.contains("refused") && $0.error.contains("loopback") })
            usleep(100_000)
            #expect(receiver.requests.allSatisfy { $0.target == "/a" })

            // App a still delivers afterwards.
            h.send("a", room: "a2")
            #expect(receiver.wait { $0.count == 3 })
            #expect(receiver.requests.allSatisfy { $0.target == "/a" })
        }
    }

    // WH-5: reaching private addresses is the operator's decision. Through the API only apps the
    // operator listed may set allowPrivateNetwork (403 on the field otherwise); the command line may
    // for any endpoint; and what the store holds (an endpoint an app created for itself before) is
    // refused when delivering.
    @Test func onlyTheOperatorLetsEndpointsReachPrivateAddresses() async throws {
        try await offPool { () throws in
            let receiver = try LocalReceiver()
            defer { receiver.stop() }
            var c = WebhookService.Configuration()
            c.retry = RetrySchedule(delays: [50], jitter: 0)
            c.privateNetworkApps = ["trusted"]
            let legacy = WebhookEndpoint(id: "ep_legacy", app: "tenant", url: "http://127.0.0.1:\(receiver.port)/legacy", secret: StandardWebhooks.makeSecret { 1 },
                                         events: [], format: .standard, allowPrivateNetwork: true, origin: "api", createdAt: 0)
            let h = try DeliveryHarness(c, apps: ["trusted", "tenant"]) { store, _ in
                try store.database.write { db in try WebhookDatabase.save(legacy, db) }
            }
            defer { h.stop() }

            // The tenant asks for itself: refused, whether the target is a literal or a name.
            for url in [receiver.url("/x"), "http://localhost:\(receiver.port)/x"] {
                guard case .failure(let refused) = h.create("tenant", .init(url: url, allowPrivateNetwork: true)) else {
                    Issue.record("the tenant let itself reach \(url)")
                    continue
                }
                #expect(refused.code == .permissionDenied && refused.field == "allowPrivateNetwork")
            }
            // Without asking, a private literal is refused as before (400 on the URL).
            guard case .failure(let literal) = h.create("tenant", .init(url: receiver.url("/x"))) else {
                Issue.record("a loopback URL was accepted")
                return
            }
            #expect(literal.code == .invalidParameter && literal.field == "url")
            // Nor by a change of an endpoint it has.
            let plain = try h.create("tenant", .init(url: "https://hooks.example.invalid/in", events: ["member.joined"])).get()
            guard case .failure(let patched) = h.update("tenant", plain.id, .init(allowPrivateNetwork: true)) else {
                Issue.record("the tenant let itself reach private addresses by an update")
                return
            }
            #expect(patched.code == .permissionDenied && patched.field == "allowPrivateNetwork")
            #expect(try h.update("tenant", plain.id, .init(allowPrivateNetwork: false)).get().allowPrivateNetwork == false)

            // A listed app may.
            let trusted = try h.create("trusted", .init(url: receiver.url("/trusted"), allowPrivateNetwork: true)).get()
            #expect(h.service.mayReachPrivate(trusted))

            // The endpoint the tenant gave itself before the list existed is refused when connecting;
            // the listed app's is delivered.
            #expect(!h.service.mayReachPrivate(legacy))
            h.send("tenant", room: "t")
            let dead = h.waitFor(legacy.id) { $0.first?.status == .dead }
            #expect(dead.first?.history.first?.error.contains("refused") == true)
            h.send("trusted", room: "t")
            #expect(receiver.wait { $0.contains { $0.target == "/trusted" } })
            #expect(!receiver.requests.contains { $0.target == "/legacy" })
        }
    }

    // WH-5: an endpoint of the command line is the operator's: it may reach private addresses for
    // any app, and the app cannot point it elsewhere through the API.
    @Test func commandLineEndpointsKeepTheOperatorsURL() async throws {
        try await offPool { () throws in
            let receiver = try LocalReceiver()
            defer { receiver.stop() }
            let h = try DeliveryHarness(WebhookService.Configuration(), apps: ["tenant"]) { _, service in
                try service.configure(app: "tenant", .init(url: receiver.url("/cfg"), allowPrivateNetwork: true))
            }
            defer { h.stop() }
            let e = try #require(h.service.endpoints(app: "tenant").first)
            #expect(e.origin == "config" && h.service.mayReachPrivate(e))
            guard case .failure(let moved) = h.update("tenant", e.id, .init(url: "http://localhost:22/")) else {
                Issue.record("the app re-pointed the operator's endpoint")
                return
            }
            #expect(moved.code == .permissionDenied && moved.field == "url")
            // Other changes are the app's to make.
            #expect(try h.update("tenant", e.id, .init(events: ["room.created"])).get().events == [.roomCreated])
            h.send("tenant", room: "r")
            #expect(receiver.wait { $0.count == 1 && $0[0].target == "/cfg" })
        }
    }

    // Fairness: one app whose receiver stalls (accepts, never answers) with a backlog must not hold
    // the delivery slots of every app. Another app's deliveries keep their latency.
    @Test func aStalledAppDoesNotDelayOtherApps() async throws {
        try await offPool { () throws in
            let stalled = try LocalReceiver(stalled: true)
            defer { stalled.stop() }
            let healthy = try LocalReceiver()
            defer { healthy.stop() }
            var c = WebhookService.Configuration()
            c.maxInFlight = 8
            c.maxInFlightPerEndpoint = 8
            c.timeoutMs = 2_000
            c.connectTimeoutMs = 1_000
            c.retry = RetrySchedule(delays: [3_600_000], jitter: 0)
            c.privateNetworkApps = ["*"]
            #expect(c.perAppLimit(apps: 1) == 8 && c.perAppLimit(apps: 2) == 4 && c.perAppLimit(apps: 9) == 2)
            let h = try DeliveryHarness(c, apps: ["slow", "fast"])
            defer { h.stop() }
            for path in ["/s1", "/s2"] { _ = try h.create("slow", .init(url: stalled.url(path), allowPrivateNetwork: true)).get() }
            let fast = try h.create("fast", .init(url: healthy.url("/f"), allowPrivateNetwork: true)).get()

            // The slow app's backlog is queued first.
            let began = ContinuousClock.now
            for i in 0..<30 { h.send("slow", room: "s\(i)") }
            #expect(stalled.wait { $0.count >= 2 })

            // The fast app's messages, one at a time, across the slow app's timeouts.
            var latencies: [Duration] = []
            for i in 0..<24 {
                let sent = ContinuousClock.now
                h.send("fast", room: "f\(i)")
                guard healthy.wait(timeout: .seconds(5), until: { $0.count == i + 1 }) else {
                    Issue.record("fast delivery \(i) did not arrive within 5 s")
                    break
                }
                latencies.append(healthy.requests[i].arrived - sent)
                usleep(100_000)
            }
            let worst = latencies.max() ?? .seconds(99)
            #expect(worst < .milliseconds(400), "fast app latencies: \(latencies)")
            #expect(ContinuousClock.now - began > .milliseconds(2_400), "the test must outlast one stalled timeout")
            #expect(h.deliveries(fast.id).count == 24)

            // The slow app held its share (half of the slots: two apps have endpoints), round-robin
            // over its endpoints: four at a time, two each, the next ones only once those timed out.
            let first = stalled.requests.filter { $0.arrived - began < .milliseconds(1_900) }
            #expect(first.count == 4 && first.filter { $0.target == "/s1" }.count == 2, "\(first.map(\.target))")
        }
    }
}

extension LocalReceiver {
    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }
}
