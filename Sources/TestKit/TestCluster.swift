import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Three `roomcast` nodes on one PostgreSQL 15 (CLUSTER.md): clients spread over the nodes, REST
/// calls sent to another node than the clients, and the cluster behaving as one server.
public final class TestCluster: @unchecked Sendable {
    // Safety: `nodes` is changed by one thread at a time (the test's, or a killer thread while the
    // test thread only waits for load generators that copied the ports they need beforehand).
    public let pg: PostgresServer
    public let url: String
    public var nodes: [GatewayProcess?] = []
    public let timeout: Int
    /// Options every node gets besides the cluster's own.
    public let extra: [String]

    public init(nodes count: Int = 3, nodeTimeout: Int = 10, database: String, extra: [String] = []) throws {
        pg = try PostgresServer()
        try pg.createDatabase(database)
        url = pg.url(database)
        timeout = nodeTimeout
        self.extra = extra
        // CL-1: each node migrates (once for the cluster) and registers; they catch up together.
        nodes = try (0..<count).map { i in try Self.start(i, url: url, timeout: nodeTimeout, extra: extra) }
        for i in 0..<count { try waitReady(i) }
    }

    /// Node `i`, on a fresh data directory or on `dataDirectory` (an earlier run's).
    public func start(_ i: Int, dataDirectory: String? = nil) throws -> GatewayProcess {
        try Self.start(i, url: url, timeout: timeout, extra: extra, dataDirectory: dataDirectory)
    }

    public static func start(_ i: Int, url: String, timeout: Int, extra: [String] = [], dataDirectory: String? = nil) throws -> GatewayProcess {
        try GatewayProcess(dataDirectory: dataDirectory, extra: ["--cluster", url, "--node-id", "n\(i)", "--node-timeout", "\(timeout)",
                                                                 "--event-loops", "1", "--presence-grace", "0"] + extra)
    }

    public func restart(_ i: Int) throws {
        nodes[i] = try start(i)
        try waitReady(i)
    }

    public subscript(_ i: Int) -> GatewayProcess { nodes[i]! }

    public func kill(_ i: Int) {
        nodes[i]?.stop()
        nodes[i] = nil
    }

    /// The node's /readyz as JSON once it answers 200.
    @discardableResult
    public func waitReady(_ i: Int, timeout: Double = 60) throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let r = try? self[i].rest().call("GET", "/readyz"), r.status == 200 { return r.json }
            usleep(50_000)
        }
        throw TestKitError.timeout("node \(i) not ready:\n\(self[i].process.log)")
    }

    public func readyz(_ i: Int) throws -> RESTClient.Response { try self[i].rest().call("GET", "/readyz") }

    deinit { for n in nodes { n?.stop() } }

    /// The position node `i` has applied, from its /readyz.
    public func applied(_ i: Int) throws -> Int {
        ((try readyz(i).json["cluster"] as? [String: Any])?["applied"] as? NSNumber)?.intValue ?? 0
    }

    /// Waits until every running node has applied what any of them had applied when called: a
    /// read on any node then sees every change acknowledged before.
    public func settle(timeout: Double = 10) throws {
        let running = nodes.indices.filter { nodes[$0] != nil }
        let target = try running.map { try applied($0) }.max() ?? 0
        let deadline = Date().addingTimeInterval(timeout)
        for i in running {
            while try applied(i) < target {
                guard Date() < deadline else { throw TestKitError.timeout("node \(i) did not reach position \(target)") }
                usleep(5_000)
            }
        }
    }
}
