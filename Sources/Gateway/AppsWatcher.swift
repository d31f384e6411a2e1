import Chat
import Engine
import Foundation
import Logging
import Reactor
import Server
import Store
import Synchronization
import Wire

/// What the operator side of a node is given (OP-1, OP-2; the CLI maps its flags onto it).
public struct OperationsConfiguration: Sendable {
    /// The operator credential (`--operator-token`): a bearer token separate from every app's
    /// secret. Nil: the operator API answers 403 (40310) to every call.
    public var operatorToken: String?
    /// Where `POST /v1/admin/backup` writes its files; nil: `<data directory>/backups`.
    public var backupDirectory: String?
    /// How often a running node looks at the store for app changes made by `roomcast apps` in
    /// another process (changes made through the operator API apply at once).
    public var appsPollMilliseconds: Int64 = OperationsConfiguration.defaultAppsPollMilliseconds
    /// How an online backup paces itself.
    public var backupPace = StoreBackup.Pace()
    /// Secrets for new apps and rotations (24 random bytes as hex; injected by tests).
    public var makeSecret: @Sendable () -> String = { randomHex(24) }

    /// Shortest operator token accepted.
    public static let minimumTokenBytes = 16
    public static let defaultAppsPollMilliseconds: Int64 = 2_000
    /// OP-2: a rotated app secret stays valid this long (as a rotated webhook secret does).
    public static let secretGraceMilliseconds: Int64 = 24 * 3600 * 1000

    public init() {}
}

/// Keeps a running node's apps in step with its store (OP-2): the apps `roomcast apps` changes in
/// another process, or the operator API in this one. It polls the store's apps generation every
/// `appsPollMilliseconds` on a thread of its own ("roomcast-ops", which also runs the operator
/// API's store writes, off the I/O loops); when it moved, new and re-enabled apps are served
/// (and given to the domain), rotated secrets take effect with the previous one kept for its
/// grace, and disabled or removed apps are refused and their WebSockets closed (4004).
final class AppsWatcher: Sendable {
    let store: Store
    let registry: AppRegistry
    let engine: Engine
    let hubs: HubTable
    let logger: Logger
    let pollInterval: Duration
    let loop: EventLoop
    private let thread = Mutex<PosixThread?>(nil)
    /// The generation last applied (-1: none yet).
    private let applied = Atomic<Int64>(-1)

    init(store: Store, registry: AppRegistry, engine: Engine, hubs: HubTable, pollMilliseconds: Int64, logger: Logger) throws {
        self.store = store
        self.registry = registry
        self.engine = engine
        self.hubs = hubs
        self.logger = logger
        self.pollInterval = .milliseconds(pollMilliseconds)
        loop = try EventLoop(name: "roomcast-ops", readBufferSize: 16)
    }

    /// Applies the store's apps once (before the node serves), then polls.
    func start() {
        guard thread.withLock({ $0 == nil }) else { return }
        sync()
        let loop = self.loop
        thread.withLock { $0 = PosixThread.start(name: "roomcast-ops") { loop.run() } }
        loop.scheduleRepeating(every: pollInterval) { [self] in sync() }
    }

    func stop() {
        guard let t = thread.withLock({ t -> PosixThread? in defer { t = nil }; return t }) else { return }
        loop.stop()
        t.join()
    }

    /// Runs `body` on the watcher's thread.
    func execute(_ body: @escaping @Sendable () -> Void) { loop.execute(body) }

    /// The generation this node has applied.
    var generation: Int64 { applied.load(ordering: .acquiring) }

    /// Applies the store's apps if their generation moved since the last time.
    func sync() {
        do {
            let (generation, apps) = try store.operatorApps()
            guard generation != applied.load(ordering: .acquiring) else { return }
            apply(apps)
            applied.store(generation, ordering: .releasing)
        } catch {
            logger.error("could not read the apps from the store", metadata: ["error": "\(error)"])
        }
    }

    private func apply(_ apps: [OperatorApp]) {
        for app in apps {
            switch app.status {
            case .active:
                if var entry = registry.app(app.key) {
                    guard entry.secret != app.secret || entry.previousSecret != app.previousSecret
                            || entry.previousSecretExpiresAt != (app.previousSecretExpiresAt ?? 0) else { continue }
                    entry.secret = app.secret
                    entry.previousSecret = app.previousSecret
                    entry.previousSecretExpiresAt = app.previousSecretExpiresAt ?? 0
                    registry.set(entry)
                    logger.notice("app secret rotated", metadata: ["app": "\(app.key)"])
                } else {
                    let settings = (try? JSONDecoder().decode(AppSettings.self, from: Data(app.settings.utf8))) ?? AppSettings()
                    var entry = AppRegistry.App(key: app.key, secret: app.secret, allowedOrigins: settings.allowedOrigins, settings: settings)
                    entry.previousSecret = app.previousSecret
                    entry.previousSecretExpiresAt = app.previousSecretExpiresAt ?? 0
                    // A new app is made in the domain with its stored settings; one the domain
                    // holds already (enabled again) is left as it is. The app is served only once
                    // the domain has it, so a call made right after the operator's answer finds it
                    // (this runs on the watcher's own thread, which may wait; at most 5 s).
                    let engine = self.engine
                    let made = DispatchSemaphore(value: 0)
                    engine.query(.appSettings(app: app.key)) { result in
                        guard case .failure = result else { made.signal(); return }
                        engine.submit(.configureApp(app: app.key, settings), replyTo: .callback({ _ in made.signal() }))
                    }
                    if made.wait(timeout: .now() + 5) == .timedOut {
                        logger.warning("the engine did not confirm the app within 5 s; serving it anyway", metadata: ["app": "\(app.key)"])
                    }
                    registry.enable(entry)
                    logger.notice("app serving", metadata: ["app": "\(app.key)"])
                }
            case .disabled, .removing:
                guard !registry.isDisabled(app.key) || registry.app(app.key) != nil else { continue }
                registry.disable(app.key)
                closeConnections(of: app.key)
                logger.notice(app.status == .disabled ? "app disabled" : "app removed (its data is deleted at the next start)",
                              metadata: ["app": "\(app.key)"])
            }
        }
        // An app whose row is gone is no longer served.
        let stored = Set(apps.map(\.key))
        for entry in registry.all where !stored.contains(entry.key) {
            registry.disable(entry.key)
            closeConnections(of: entry.key)
        }
    }

    /// Closes the app's WebSockets on every loop (4004: the app key is no longer valid).
    private func closeConnections(of key: String) {
        hubs.onEveryHub { hub in
            for session in hub.sessions.values.filter({ $0.app == key }) { session.close(.badToken, "the app was disabled by the operator") }
        }
    }
}

/// A node's operator side, built with its core (the one hook in the gateway's wiring): the apps
/// watcher (where the node's apps live in its own store) and the operator API's routes.
final class Operations: Sendable {
    let watcher: AppsWatcher?
    let api: OperatorAPI

    init(configuration: GatewayConfiguration, store: Store, registry: AppRegistry, engine: Engine, hubs: HubTable, appsInOwnStore: Bool,
         clock: @escaping @Sendable () -> Int64, logger: Logger) throws {
        watcher = !appsInOwnStore ? nil : try AppsWatcher(store: store, registry: registry, engine: engine, hubs: hubs,
                                                   pollMilliseconds: configuration.operations.appsPollMilliseconds, logger: logger)
        api = OperatorAPI(configuration: configuration.operations, store: store, watcher: watcher, dataDirectory: configuration.dataDirectory,
                          clock: clock, logger: logger)
    }

    func register(_ routes: inout Router.Builder) { api.register(&routes) }
    func start() { watcher?.start() }
    func stop() { watcher?.stop() }
}
