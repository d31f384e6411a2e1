import Foundation
import Testing
import TestKit

/// End-to-end smoke tests against the real `roomcast` binary over real sockets, so the wiring the
/// in-process tests skip stays covered: the CLI and its app, the HTTP server and its request
/// signing over the wire, WebSocket upgrades (and their Origin header) on every I/O loop, and the
/// engine's stream fanned out to every loop's hub. The same scenarios run in-process
/// (ScenarioTests, InProcessTests).
@Suite("Smoke tests over real sockets", .serialized)
struct SmokeTests {
    // RC-1, RC-2, RC-5, RC-6, RC-7
    @Test func rongCloudModerationReachesExactlyItsAudience() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess()
            defer { g.stop() }
            try Scenarios.rongCloudModeration(g)
        }
    }

    // QS-1, QS-2, QS-5 against the binary.
    // AU-1, AU-2 against the binary.
    // MO-1, MO-2 against the binary.
    @Test func moderation() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess()
            defer { g.stop() }
            try Scenarios.moderation(g)
        }
    }

    @Test func audiences() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess()
            defer { g.stop() }
            try Scenarios.audiences(g)
        }
    }

    @Test func roomQoS() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess()
            defer { g.stop() }
            try Scenarios.roomQoS(g)
        }
    }

    // SPEC §2: the per-app Origin allowlist applies to the Origin header of a real WebSocket
    // upgrade.
    @Test func perAppOriginAllowlist() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess()
            defer { g.stop() }
            let rest = g.rest()
            #expect(try rest.call("PATCH", "/v1/settings", ["allowedOrigins": ["https://app.example.com"]]).status == 200)
            let good = try ProtocolClient(port: g.port, origin: "https://app.example.com")
            try good.connect(token: try rest.token("u1"))
            let bad = try ProtocolClient(port: g.port, origin: "https://evil.example.net")
            #expect(throws: (any Error).self) { try bad.connect(token: try rest.token("u2")) }
            #expect(bad.closeCode == 4003)
        }
    }
}
