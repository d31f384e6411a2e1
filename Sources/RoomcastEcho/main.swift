import ArgumentParser
import Logging
import Reactor
import Server
import WebSocket
#if canImport(Glibc)
import Glibc
#endif

/// Echoes every WebSocket message back (the Autobahn fuzzingclient's server under test).
final class EchoHandler: WebSocketHandler {
    func webSocketDidOpen(_ connection: Connection) {}
    func webSocket(_ connection: Connection, didReceive message: WebSocketMessage) {
        connection.send(message)
    }
    func webSocketDidClose(_ connection: Connection, code: WebSocketCloseCode?) {}
}

struct EchoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "roomcast-echo",
        abstract: "A WebSocket echo server built from Roomcast's Server and WebSocket code (for conformance tests).")

    @Option(help: "Port to listen on (127.0.0.1).")
    var port: UInt16 = 9001

    @Option(help: "Largest message in bytes.")
    var maxMessageBytes: Int = 16 << 20

    @Flag(inversion: .prefixedNo, help: "Offer permessage-deflate.")
    var deflate = true

    @Option(help: "Event-loop threads.")
    var eventLoops = 1

    func run() throws {
        LoggingSystem.bootstrap { label in
            var h = StreamLogHandler.standardError(label: label)
            h.logLevel = .warning
            return h
        }
        blockSignals([SIGINT, SIGTERM])
        var configuration = ServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = port
        configuration.eventLoops = eventLoops
        configuration.webSocket.path = "/"
        configuration.webSocket.maxMessageBytes = maxMessageBytes
        configuration.maxOutboundBytes = 4 * maxMessageBytes
        configuration.webSocket.deflate.enabled = deflate
        configuration.webSocket.deflate.maxInflatedBytes = maxMessageBytes
        configuration.drainTimeout = .seconds(2)
        let server = try HTTPServer(configuration: configuration, router: Router.Builder().build(),
                                    upgradeHandler: { _, _, _ in .accept(EchoHandler()) }, logger: Logger(label: "roomcast-echo"))
        try server.start()
        print("roomcast-echo listening on ws://127.0.0.1:\(server.port)/")
        fflush(nil)
        _ = waitForSignal([SIGINT, SIGTERM])
        server.shutdown()
    }
}

EchoCommand.main()
