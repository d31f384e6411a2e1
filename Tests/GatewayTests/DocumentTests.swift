import Foundation
import Gateway
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

    @Test func repositoryFilesMatchTheCode() throws {
        // Regenerate with: roomcast --print-openapi / --print-error-table / --print-websocket-schema / --print-websocket-doc
        #expect(try file("roomcast.openapi.json") == OpenAPIDocument.json)
        #expect(try file("errors.md") == ErrorTable.markdown)
        #expect(try file("roomcast.websocket.json") == WebSocketDocument.json)
        #expect(try file("websocket.md") == WebSocketDocument.markdown)
    }

    @Test func everyErrorCodeHasOneRow() {
        let codes = ErrorTable.rows.map(\.code)
        #expect(Set(codes).count == codes.count)
        #expect(codes.contains(23406) && codes.contains(40100))
    }

    @Test func theServerServesTheDocuments() throws {
        let g = try GatewayProcess()
        defer { g.stop() }
        let rest = g.rest()
        let openapi = try rest.call("GET", "/openapi.json", headers: [])
        #expect(openapi.status == 200 && openapi.text == OpenAPIDocument.json)
        let ws = try rest.call("GET", "/websocket.json", headers: [])
        #expect(ws.status == 200 && ws.text == WebSocketDocument.json)
    }
}
