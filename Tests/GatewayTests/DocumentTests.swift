import Foundation
import Gateway
import Wire
import Testing
import TestKit

/// The published documents in `openapi/` are generated from the code; these keep them identical,
/// and check the server serves the same bytes.
@Suite("Published API documents")
struct DocumentTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    func file(_ name: String) throws -> String {
        try String(contentsOf: Self.root.appendingPathComponent("openapi").appendingPathComponent(name), encoding: .utf8)
    }

    @Test func repositoryFilesMatchTheCode() async throws {
        try await offPool { () throws in
            // Regenerate with: scripts/regenerate-docs.sh (roomcast --print-openapi / --print-error-table /
            // --print-websocket-schema / --print-websocket-doc / --print-sse-doc)
            #expect(try file("roomcast.openapi.json") == OpenAPIDocument.json)
            #expect(try file("errors.md") == ErrorTable.markdown)
            #expect(try file("roomcast.websocket.json") == WebSocketDocument.json)
            #expect(try file("websocket.md") == WebSocketDocument.markdown)
            #expect(try file("sse.md") == EventStreamDocument.markdown)
        }
    }

    @Test func everyErrorCodeHasOneRow() {
        let codes = ErrorTable.rows.map(\.code)
        #expect(Set(codes).count == codes.count)
        #expect(codes.contains(23406) && codes.contains(40100))
    }

    @Test func theServerServesTheDocuments() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess()
            defer { g.stop() }
            let rest = g.rest()
            let openapi = try rest.call("GET", "/openapi.json", headers: [])
            #expect(openapi.status == 200 && openapi.text == OpenAPIDocument.json)
            let ws = try rest.call("GET", "/websocket.json", headers: [])
            #expect(ws.status == 200 && ws.text == WebSocketDocument.json)
        }
    }

    // BX-2: health, readiness and Prometheus metrics.
    @Test func healthReadinessAndMetrics() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess()
            defer { g.stop() }
            let rest = g.rest()
            #expect(try rest.call("GET", "/healthz", headers: []).json.str("status") == "ok")
            #expect(try rest.call("GET", "/readyz", headers: []).json.str("status") == "ready")
            #expect(try rest.call("POST", "/v1/rooms", ["roomId": "m"]).status == 201)
            let metrics = try rest.call("GET", "/metrics", headers: []).text
            for name in ["roomcast_connections_open", "roomcast_http_requests_total", "roomcast_store_commits_total", "roomcast_webhook_attempts_total",
                         "roomcast_webhook_queue_depth", "roomcast_webhook_attempt_duration_bucket", "roomcast_webhook_deliveries_owned",
                         "roomcast_webhook_deliveries_parked"] {
                #expect(metrics.contains("\n\(name)"), "missing \(name)")
            }
            let requests = metrics.split(separator: "\n").first { $0.hasPrefix("roomcast_http_requests_total ") }
            #expect((requests.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0) >= 3)
            // The three answered requests are in the request-duration histogram.
            let answered = metrics.split(separator: "\n").first { $0.hasPrefix("roomcast_http_request_duration_seconds_count ") }
            #expect((answered.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0) >= 3)
            #expect(metrics.contains("# TYPE roomcast_http_request_duration_seconds histogram\n"))
        }
    }
}
