import Chat
import Crypto
import Foundation
import HTTP1
import Logging
import Reactor
import Server
import Store
import Synchronization
import Wire

/// A refused operator action (OP-1..OP-3), with its row of the error table. The operator API
/// answers it as any REST refusal; `roomcast backup|restore|apps` print `error CODE: message` and
/// exit 1. Nothing was changed.
public struct OperatorRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public let code: Int
    public let httpStatus: Int
    public let message: String
    public let field: String?

    public init(_ code: ErrorCode, _ message: String, field: String? = nil) {
        self.code = code.rawValue
        self.httpStatus = code.httpStatus
        self.message = message
        self.field = field
    }

    public var description: String { "error \(code): \(message)" }

    /// The refusal for an error of the store's operator side.
    public static func from(_ error: any Error) -> OperatorRefusal {
        switch error {
        case let r as OperatorRefusal: return r
        case let e as OperatorAppsError:
            switch e {
            case .unknownApp: return OperatorRefusal(.appNotFound, e.description, field: "key")
            case .exists: return OperatorRefusal(.alreadyExists, e.description, field: "key")
            case .removing: return OperatorRefusal(.appRemoving, e.description, field: "key")
            case .invalid(let field, let message): return OperatorRefusal(.invalidParameter, message, field: field)
            }
        case let e as SchemaError:
            switch e {
            case .newer: return OperatorRefusal(.writtenByNewerVersion, e.description)
            case .olderThanThisCommand: return OperatorRefusal(.dataDirectoryInUse, e.description)
            }
        case let e as StoreBackup.Failure:
            switch e {
            case .notABackup: return OperatorRefusal(.notABackup, e.description)
            case .newer: return OperatorRefusal(.writtenByNewerVersion, e.description)
            case .io: return OperatorRefusal(.backupFailed, e.description)
            }
        case let e as StoreBackup.RestoreFailure:
            switch e {
            case .inUse: return OperatorRefusal(.dataDirectoryInUse, e.description)
            case .notEmpty: return OperatorRefusal(.dataDirectoryNotEmpty, e.description)
            }
        case let e as StoreFile.Failure:
            return OperatorRefusal(.noDatabase, e.description)
        case let e as DataDirectoryLock.Failure:
            switch e {
            case .held: return OperatorRefusal(.dataDirectoryInUse, e.description + "; stop it first. Nothing was changed.")
            case .cannotOpen: return OperatorRefusal(.storageUnavailable, e.description)
            }
        default:
            return OperatorRefusal(.storageUnavailable, "the store could not do it: \(error)")
        }
    }

    var response: Response {
        .json(HTTPStatus(code: httpStatus), ErrorTable.body(code: code, message: message, field: field))
    }
}

/// The operator API (OP-1, OP-2) under `/v1/admin`: apps and backups, guarded by the operator
/// credential — `Authorization: Bearer <--operator-token>`, compared in constant time (as SHA-256
/// digests, so neither the length nor the bytes of the token leak through timing), separate from
/// every app's secret. Without a configured token every call is refused (403, 40310). On a cluster
/// node the apps are its command line's and the data is PostgreSQL's: apps and backup calls are
/// refused with 501 (50101).
struct OperatorAPI: Sendable {
    let configuration: OperationsConfiguration
    let store: Store
    /// Nil on a cluster node.
    let watcher: AppsWatcher?
    let dataDirectory: String
    let clock: @Sendable () -> Int64
    let logger: Logger
    let backups = BackupSlot()

    /// SHA-256 of the operator token (nil: the API is off).
    private var tokenDigest: [UInt8]? { configuration.operatorToken.map { Array(SHA256.hash(data: Array($0.utf8))) } }

    var backupDirectory: String { configuration.backupDirectory ?? dataDirectory + "/backups" }

    /// One backup at a time per node.
    final class BackupSlot: Sendable {
        private let busy = Atomic<Bool>(false)
        func take() -> Bool { busy.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged }
        func give() { busy.store(false, ordering: .releasing) }
    }

    /// The caller's credential: nil when it may go on.
    static func refusal(_ request: Request, digest: [UInt8]?) -> Response? {
        guard let digest else {
            return OperatorRefusal(.operatorAPIOff,
                                   "the operator API is off: start the node with --operator-token (or ROOMCAST_OPERATOR_TOKEN)").response
        }
        let header = request.head.headers["authorization"] ?? ""
        let prefix = "bearer "
        let given = header.lowercased().hasPrefix(prefix) ? String(header.dropFirst(prefix.count)).trimmingCharacters(in: .whitespaces) : ""
        let givenDigest = Array(SHA256.hash(data: Array(given.utf8)))
        var diff: UInt8 = 0
        for i in 0..<digest.count { diff |= digest[i] ^ givenDigest[i] }
        guard diff == 0 && !given.isEmpty else {
            var response = OperatorRefusal(.operatorUnauthorized,
                                           "send the operator token as Authorization: Bearer <token>", field: "Authorization").response
            response.headers.add("WWW-Authenticate", #"Bearer realm="roomcast-operator""#)
            return response
        }
        return nil
    }

    /// Wraps a handler with the operator check; the handler runs on the operations thread (store
    /// writes and reads stay off the I/O loops).
    private func guarded(_ name: String, _ handler: @escaping @Sendable (Request, _ requestID: String) throws -> Response)
        -> @Sendable (Request, ResponseWriter) -> Void {
        let digest = tokenDigest
        let watcher = self.watcher
        let logger = self.logger
        return { request, writer in
            if let refused = Self.refusal(request, digest: digest) {
                logger.warning("operator call refused", metadata: ["call": "\(name)", "peer": "\(request.peer.host)"])
                return writer.send(refused)
            }
            let requestID = Self.requestID(request)
            let run: @Sendable () -> Void = {
                do {
                    writer.send(try handler(request, requestID))
                } catch {
                    let refusal = OperatorRefusal.from(error)
                    logger.notice("operator call refused", metadata: ["call": "\(name)", "request_id": "\(requestID)", "code": "\(refusal.code)"])
                    writer.send(refusal.response)
                }
            }
            if let watcher { watcher.execute(run) } else { run() }
        }
    }

    /// The caller's `X-Request-Id` (visible ASCII, at most 64 bytes) or a new one, for the log.
    static func requestID(_ request: Request) -> String {
        if let id = request.head.headers["x-request-id"], !id.isEmpty, id.utf8.count <= 64, id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) {
            return id
        }
        return String(UInt64.random(in: 0...UInt64.max), radix: 16)
    }

    func register(_ r: inout Router.Builder) {
        let api = self
        r.add(.GET, "/v1/admin/apps", guarded("apps.list") { _, _ in try api.list() })
        r.add(.POST, "/v1/admin/apps", guarded("apps.add") { req, id in try api.add(req, id) })
        r.add(.GET, "/v1/admin/apps/{key}", guarded("apps.get") { req, _ in try api.get(req) })
        r.add(.POST, "/v1/admin/apps/{key}/rotate-secret", guarded("apps.rotate-secret") { req, id in try api.rotate(req, id) })
        r.add(.POST, "/v1/admin/apps/{key}/disable", guarded("apps.disable") { req, id in try api.setActive(req, false, id) })
        r.add(.POST, "/v1/admin/apps/{key}/enable", guarded("apps.enable") { req, id in try api.setActive(req, true, id) })
        r.add(.DELETE, "/v1/admin/apps/{key}", guarded("apps.remove") { req, id in try api.remove(req, id) })
        r.add(.POST, "/v1/admin/backup", guardedBackup())
    }

    // MARK: Apps

    private func requireSingleNode() throws -> AppsWatcher {
        guard let watcher else {
            throw OperatorRefusal(.notOnClusterNodes, "a cluster's apps are its nodes' --app list (the same on every node)")
        }
        return watcher
    }

    static func appJSON(_ app: OperatorApp, now: Int64, secret: Bool, _ w: inout JSONWriter) {
        w.beginObject()
        w.field("key", app.key)
        w.field("status", app.status.rawValue)
        w.field("origin", app.origin)
        w.field("createdAt", app.createdAt)
        let previous = app.previousSecret(at: now) != nil
        w.field("rotating", previous)
        if previous, let until = app.previousSecretExpiresAt { w.field("previousSecretExpiresAt", until) }
        if secret { w.field("secret", app.secret) }
        w.endObject()
    }

    static func appBody(_ app: OperatorApp, now: Int64, secret: Bool) -> [UInt8] {
        JSONWriter.object { w in
            w.key("app")
            appJSON(app, now: now, secret: secret, &w)
        }
    }

    private func list() throws -> Response {
        _ = try requireSingleNode()
        let (generation, apps) = try store.operatorApps()
        let now = clock()
        return .json(.ok, JSONWriter.object { w in
            w.key("apps")
            w.beginArray()
            for app in apps { Self.appJSON(app, now: now, secret: false, &w) }
            w.endArray()
            w.field("generation", generation)
        })
    }

    private func get(_ request: Request) throws -> Response {
        _ = try requireSingleNode()
        let key = request.pathParameters["key"] ?? ""
        guard let app = try store.app(key) else { throw OperatorAppsError.unknownApp(key) }
        return .json(.ok, Self.appBody(app, now: clock(), secret: false))
    }

    private struct SecretBody: Decodable {
        var key: String?
        var secret: String?
    }

    private func body(_ request: Request) throws -> SecretBody {
        guard !request.body.isEmpty else { return SecretBody() }
        do {
            return try JSONDecoder().decode(SecretBody.self, from: Data(request.body))
        } catch {
            throw OperatorRefusal(.badRequest, "the body must be a JSON object such as {\"key\": \"…\", \"secret\": \"…\"}")
        }
    }

    private func add(_ request: Request, _ requestID: String) throws -> Response {
        let watcher = try requireSingleNode()
        let b = try body(request)
        guard let key = b.key else { throw OperatorAppsError.invalid(field: "key", message: "give the new app's key") }
        let app = try store.addApp(key: key, secret: b.secret ?? configuration.makeSecret(), now: clock())
        watcher.sync()
        logger.notice("operator: app added", metadata: ["app": "\(key)", "request_id": "\(requestID)"])
        return .json(.created, Self.appBody(app, now: clock(), secret: true))
    }

    private func rotate(_ request: Request, _ requestID: String) throws -> Response {
        let watcher = try requireSingleNode()
        let key = request.pathParameters["key"] ?? ""
        let b = try body(request)
        let app = try store.rotateAppSecret(key: key, secret: b.secret ?? configuration.makeSecret(), now: clock(),
                                            graceMilliseconds: OperationsConfiguration.secretGraceMilliseconds)
        watcher.sync()
        logger.notice("operator: app secret rotated", metadata: ["app": "\(key)", "request_id": "\(requestID)"])
        return .json(.ok, Self.appBody(app, now: clock(), secret: true))
    }

    private func setActive(_ request: Request, _ active: Bool, _ requestID: String) throws -> Response {
        let watcher = try requireSingleNode()
        let key = request.pathParameters["key"] ?? ""
        let app = try store.setAppActive(key: key, active)
        watcher.sync()
        logger.notice(active ? "operator: app enabled" : "operator: app disabled", metadata: ["app": "\(key)", "request_id": "\(requestID)"])
        return .json(.ok, Self.appBody(app, now: clock(), secret: false))
    }

    private func remove(_ request: Request, _ requestID: String) throws -> Response {
        let watcher = try requireSingleNode()
        let key = request.pathParameters["key"] ?? ""
        let removal = try store.removeApp(key: key, nodeRunning: true)
        watcher.sync()
        logger.notice("operator: app removed", metadata: ["app": "\(key)", "request_id": "\(requestID)", "data": "\(removal.rawValue)"])
        return .json(.ok, JSONWriter.object { w in
            w.field("removed", key)
            w.field("data", "deleted when the node next starts")
        })
    }

    // MARK: Backup

    /// `POST /v1/admin/backup`: a consistent copy of this node's database, written by a thread of
    /// its own into the backup directory under a name the node chooses
    /// (`roomcast-YYYYmmdd-HHMMSS.sqlite`, UTC; never a path the caller names), answered once it
    /// is written and checked. One at a time (409, 40912).
    private func guardedBackup() -> @Sendable (Request, ResponseWriter) -> Void {
        let digest = tokenDigest
        let api = self
        return { request, writer in
            if let refused = Self.refusal(request, digest: digest) { return writer.send(refused) }
            guard api.watcher != nil else {
                return writer.send(OperatorRefusal(.notOnClusterNodes,
                                                   "a cluster's data is in PostgreSQL: back it up with pg_dump or PostgreSQL's point-in-time recovery").response)
            }
            guard api.backups.take() else {
                return writer.send(OperatorRefusal(.backupInProgress, "a backup of this node is already being written").response)
            }
            let requestID = Self.requestID(request)
            _ = PosixThread.start(name: "roomcast-backup") {
                defer { api.backups.give() }
                writer.send(api.backup(requestID))
            }
        }
    }

    private func backup(_ requestID: String) -> Response {
        let directory = backupDirectory
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            var name = "roomcast-\(StoreBackup.timestamp(clock())).sqlite"
            var n = 1
            while FileManager.default.fileExists(atPath: directory + "/" + name) {
                n += 1
                name = "roomcast-\(StoreBackup.timestamp(clock()))-\(n).sqlite"
            }
            logger.notice("operator: backup started", metadata: ["request_id": "\(requestID)", "file": "\(directory)/\(name)"])
            let summary = try store.backup(to: directory + "/" + name, pace: configuration.backupPace)
            logger.notice("operator: backup written", metadata: ["request_id": "\(requestID)", "file": "\(summary.path)",
                                                                 "bytes": "\(summary.bytes)", "ms": "\(summary.milliseconds)"])
            return .json(.created, JSONWriter.object { w in
                w.key("backup")
                w.beginObject()
                w.field("file", summary.path)
                w.field("name", name)
                w.field("bytes", summary.bytes)
                w.field("pages", summary.pages)
                w.field("schemaVersion", summary.schemaVersion)
                w.field("milliseconds", summary.milliseconds)
                w.endObject()
            })
        } catch {
            let refusal = OperatorRefusal.from(error)
            logger.error("operator: backup failed", metadata: ["request_id": "\(requestID)", "error": "\(refusal.message)"])
            // Any failure while writing is the backup's own (e.g. a full disk).
            return (refusal.code == ErrorCode.storageUnavailable.rawValue
                ? OperatorRefusal(.backupFailed, refusal.message) : refusal).response
        }
    }
}
