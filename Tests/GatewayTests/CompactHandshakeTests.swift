import Chat
import Foundation
import Testing
import TestKit
import WebSocket
import Wire

/// TR-5 over real sockets: the subprotocol the client asked for is echoed in the 101 (RFC 6455
/// §4.2.2) and its events come in that encoding; an unknown one offered alone is refused.
extension HardeningTests {
    /// Connects offering `offer` (nil: no header), joins `room`; returns the socket and the 101.
    func joined(_ g: GatewayProcess, offer: String?, user: String, room: String) throws -> WSClient {
        let ws = try WSClient(port: g.port, path: "/ws", headers: offer.map { ["Sec-WebSocket-Protocol": $0] } ?? [:])
        try ws.tcp.send(try frame(["id": 1, "op": "connect", "args": ["token": try g.rest().token(user)]]))
        #expect(try answer(ws, id: 1)["ok"] != nil)
        try ws.tcp.send(try frame(["id": 2, "op": "room.join", "args": ["roomId": room]]))
        #expect(try answer(ws, id: 2)["ok"] != nil)
        return ws
    }

    func firstMessageFrame(_ ws: WSClient) throws -> String {
        while true {
            if case .text(let s) = try ws.readFrame(timeout: 5), s.contains("hello-tr5") { return s }
        }
    }

    @Test("TR-5: the chosen subprotocol is echoed and its encoding used; none offered is JSON with nothing echoed; an unknown one alone is refused 400 naming the field")
    func subprotocolNegotiation() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess()
            defer { g.stop() }
            #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "hs"]).status == 201)
            let compact = try joined(g, offer: "roomcast.compact.v1", user: "c", room: "hs")
            let json = try joined(g, offer: "chat.v9, roomcast.json.v1", user: "j", room: "hs")
            let none = try joined(g, offer: nil, user: "n", room: "hs")
            #expect(compact.handshakeResponse.header("Sec-WebSocket-Protocol") == "roomcast.compact.v1")
            #expect(json.handshakeResponse.header("Sec-WebSocket-Protocol") == "roomcast.json.v1")
            #expect(none.handshakeResponse.header("Sec-WebSocket-Protocol") == nil)
            #expect(try g.rest().call("POST", "/v1/rooms/hs/messages", ["content": "hello-tr5", "fromUserId": "host"]).status == 201)
            // The room's alias on this fresh node (the first room a compact connection joined), named
            // in the compact connection's join answer (TR-5, room aliases).
            #expect(try firstMessageFrame(compact).hasPrefix(#"{"m":1,"o":"#))
            #expect(try firstMessageFrame(json).hasPrefix(#"{"ev":"room.message","roomId":"hs","epoch":"#))
            #expect(try firstMessageFrame(none).hasPrefix(#"{"ev":"room.message","roomId":"hs","epoch":"#))

            for offer in ["mqtt", "roomcast.compact.v2", "ROOMCAST.COMPACT.V1"] {
                let tcp = try TCPClient(port: g.port, timeout: 5)
                try tcp.send("GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: \(offer)\r\n\r\n")
                let r = try tcp.readResponse()
                let body = (try? JSONSerialization.jsonObject(with: Data(r.body))) as? [String: Any] ?? [:]
                #expect(r.status == 400, "\(offer): \(r.status) \(r.text)")
                #expect((body["code"] as? Int) == ErrorCode.badRequest.rawValue && (body["field"] as? String) == "Sec-WebSocket-Protocol", "\(r.text)")
                #expect(r.header("Sec-WebSocket-Protocol") == nil && r.header("Sec-WebSocket-Accept") == nil)
            }
        }
    }
}
