import Chat
import Foundation
@testable import Gateway
import Server
import Testing
import TestKit
import Wire

/// Every refusal the signed-request pipeline makes, on the native surface and on each vendor's:
/// the node catching up with its log, missing or wrong credentials, a replayed nonce, the app's
/// rate limit (PX-1), and idempotency keys (PX-2: a bad key, a replay, a key reused with another
/// request, and which headers carry a key). What each of the four surfaces answers — status,
/// body, code, field and the Retry-After and Idempotent-Replayed headers — is pinned here byte for
/// byte (taken while the native and vendor surfaces still wrote the pipeline each for itself).
@Suite("Signed-request pipeline")
struct SignedPipelineTests {
    /// One call of each surface: its name, and the call with the given headers and a body that
    /// differs by `variant` (a key reused with another request).
    struct Surface {
        let name: String
        let call: (_ headers: [(String, String)]?, _ variant: String) throws -> RESTClient.Response
        /// Signature headers as the surface's SDKs send them (a fixed nonce when given).
        let sign: (_ nonce: String?) -> [(String, String)]
    }

    static func surfaces(_ rest: InProcessREST) -> [Surface] {
        let rongCloud = { (nonce: String?) in nonce.map { rest.signatureHeaders(nonce: $0) } ?? rest.signatureHeaders() }
        let nim = { (nonce: String?) in nonce.map { rest.nimHeaders(nonce: $0) } ?? rest.nimHeaders() }
        return [
            Surface(name: "native", call: { headers, v in try rest.call("PUT", "/v1/rooms/\(v)/mute", ["muted": true], headers: headers) },
                    sign: rongCloud),
            Surface(name: "rongCloud", call: { headers, v in
                try rest.vendor(.rongCloud, "/chatroom/ban/add.json", [("chatroomId", v)], headers: headers)
            }, sign: rongCloud),
            Surface(name: "nexconn", call: { headers, v in
                try rest.vendor(.nexconn, "/v4/open-channel/freeze-list/add", json: ["channelId": v], headers: headers)
            }, sign: rongCloud),
            Surface(name: "nim", call: { headers, v in
                try rest.vendor(.nim, "/nimserver/chatroom/muteRoom.action", [("roomid", v), ("operator", "op"), ("mute", "true")], headers: headers)
            }, sign: nim),
        ]
    }

    static func line(_ surface: String, _ what: String, _ r: RESTClient.Response, body: Bool = true) -> String {
        var out = "\(surface) \(what): \(r.status)"
        if let s = r.header("Retry-After") { out += " Retry-After=\(s)" }
        if let s = r.header("Idempotent-Replayed") { out += " Idempotent-Replayed=\(s)" }
        if body { out += " " + r.text }
        return out
    }

    @Test func everySurfaceRefusesAsItDid() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        let wrong = g.rest(secret: "not-the-secret")
        // NIM's muteRoom takes the room's creator or a manager as its operator (MO-7).
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "101", "creator": "op"]).status == 201)
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "102", "creator": "op"]).status == 201)
        var lines: [String] = []
        for (i, s) in Self.surfaces(rest).enumerated() {
            g.core.context.caughtUp.set(false)
            lines.append(Self.line(s.name, "catching up", try s.call(s.sign(nil), "101")))
            g.core.context.caughtUp.set(true)
            lines.append(Self.line(s.name, "no credentials", try s.call([], "101")))
            let wrongSurface = Self.surfaces(wrong)[i]
            lines.append(Self.line(s.name, "bad signature", try s.call(wrongSurface.sign(nil), "101")))
            let nonce = "nonce-\(s.name)"
            lines.append(Self.line(s.name, "first nonce", try s.call(s.sign(nonce), "101"), body: false))
            lines.append(Self.line(s.name, "replayed nonce", try s.call(s.sign(nonce), "101")))
            lines.append(Self.line(s.name, "bad key", try s.call(s.sign(nil) + [("Idempotency-Key", "has space")], "101")))
            let key = "key-\(s.name)"
            let first = try s.call(s.sign(nil) + [("Idempotency-Key", key)], "101")
            lines.append(Self.line(s.name, "keyed", first, body: false))
            let again = try s.call(s.sign(nil) + [("Idempotency-Key", key)], "101")
            lines.append(Self.line(s.name, "keyed again", again, body: false) + " same=\(again.body == first.body)")
            lines.append(Self.line(s.name, "key reused", try s.call(s.sign(nil) + [("Idempotency-Key", key)], "102")))
            // Only Nexconn's surface reads X-Request-ID as a key.
            let request = "request-\(s.name)"
            lines.append(Self.line(s.name, "request id", try s.call(s.sign(nil) + [("X-Request-ID", request)], "101"), body: false))
            lines.append(Self.line(s.name, "request id reused", try s.call(s.sign(nil) + [("X-Request-ID", request)], "102")))
        }
        // PX-1: one bucket per app across surfaces.
        #expect(try rest.call("PATCH", "/v1/settings", ["restCallsPerSecond": 1]).status == 200)
        for s in Self.surfaces(rest) {
            g.advance(seconds: 2)
            _ = try s.call(s.sign(nil), "101")
            lines.append(Self.line(s.name, "rate limited", try s.call(s.sign(nil), "101")))
        }
        let transcript = lines.joined(separator: "\n")
        #expect(transcript == Self.expected, "\n\(transcript)")
    }

    /// The idempotency refusals a call in flight or a lost answer gets (not reached above without
    /// racing a call): every surface renders them as it did, the native one from the gateway's
    /// own codes, a vendor's in its codes (a reused key is its parameter error, one in flight its
    /// "already exists").
    @Test func idempotencyRefusalsReadAsTheyDid() {
        let h = "Idempotency-Key"
        let native = RESTSurface.native
        #expect(native.refusal(.invalidKey(header: h))
                == RESTAPI.error(ChatError(.invalidParameter, "\(h) is 1 to \(Idempotency.maxKeyBytes) visible ASCII characters", field: h)))
        #expect(native.refusal(.reused(header: h)) == RESTAPI.error(GatewayError(.idempotencyKeyReused, "this \(h) was used with another request", field: h)))
        #expect(native.refusal(.inFlight(header: h))
                == RESTAPI.error(GatewayError(.idempotencyKeyInFlight, "a request with this \(h) is still being answered", field: h)))
        #expect(native.refusal(.lost(header: h)) == RESTAPI.error(Idempotency.lostError(h)))
        for vendor in Vendor.allCases {
            let surface = RESTSurface.vendor(vendor)
            func answer(_ e: ChatError) -> Response { RESTAPI.answer(vendor.failure(e)) }
            #expect(surface.refusal(.invalidKey(header: h))
                    == answer(ChatError(.invalidParameter, "\(h) is 1 to \(Idempotency.maxKeyBytes) visible ASCII characters", field: h)))
            #expect(surface.refusal(.reused(header: h)) == answer(ChatError(.invalidParameter, "this \(h) was used with another request", field: h)))
            #expect(surface.refusal(.inFlight(header: h)) == answer(ChatError(.alreadyExists, "a request with this \(h) is still being answered", field: h)))
            #expect(surface.refusal(.lost(header: h)) == answer(Idempotency.lostError(h)))
        }
    }

    static let expected = """
        native catching up: 503 {"code":50300,"message":"the node is catching up with its log; try again shortly"}
        native no credentials: 401 {"code":40100,"message":"sign the request (App-Key/Nonce/Timestamp/Signature, AppKey/Nonce/CurTime/CheckSum, or X-Roomcast-*)","field":"headers"}
        native bad signature: 401 {"code":1004,"message":"signature mismatch","field":"Signature"}
        native first nonce: 200
        native replayed nonce: 401 {"code":40104,"message":"nonce already used","field":"Nonce"}
        native bad key: 400 {"code":1002,"message":"Idempotency-Key is 1 to 255 visible ASCII characters","field":"Idempotency-Key"}
        native keyed: 200
        native keyed again: 200 Idempotent-Replayed=true same=true
        native key reused: 422 {"code":42200,"message":"this Idempotency-Key was used with another request","field":"Idempotency-Key"}
        native request id: 200
        native request id reused: 200 {}
        rongCloud catching up: 503 Retry-After=5 {"code":50301,"errorMessage":"the node is catching up with its log; try again shortly"}
        rongCloud no credentials: 401 {"code":1004,"errorMessage":"sign the request (App-Key/Nonce/Timestamp/Signature, AppKey/Nonce/CurTime/CheckSum, or X-Roomcast-*)","field":"headers"}
        rongCloud bad signature: 401 {"code":1004,"errorMessage":"signature mismatch","field":"Signature"}
        rongCloud first nonce: 200
        rongCloud replayed nonce: 401 {"code":1004,"errorMessage":"nonce already used","field":"Nonce"}
        rongCloud bad key: 400 {"code":1002,"errorMessage":"Idempotency-Key is 1 to 255 visible ASCII characters","field":"Idempotency-Key"}
        rongCloud keyed: 200
        rongCloud keyed again: 200 Idempotent-Replayed=true same=true
        rongCloud key reused: 400 {"code":1002,"errorMessage":"this Idempotency-Key was used with another request","field":"Idempotency-Key"}
        rongCloud request id: 200
        rongCloud request id reused: 200 {"code":200}
        nexconn catching up: 503 Retry-After=5 {"code":50301,"errorMessage":"the node is catching up with its log; try again shortly"}
        nexconn no credentials: 401 {"code":1004,"errorMessage":"sign the request (App-Key/Nonce/Timestamp/Signature, AppKey/Nonce/CurTime/CheckSum, or X-Roomcast-*)","field":"headers"}
        nexconn bad signature: 401 {"code":1004,"errorMessage":"signature mismatch","field":"Signature"}
        nexconn first nonce: 200
        nexconn replayed nonce: 401 {"code":1004,"errorMessage":"nonce already used","field":"Nonce"}
        nexconn bad key: 400 {"code":1002,"errorMessage":"Idempotency-Key is 1 to 255 visible ASCII characters","field":"Idempotency-Key"}
        nexconn keyed: 200
        nexconn keyed again: 200 Idempotent-Replayed=true same=true
        nexconn key reused: 400 {"code":1002,"errorMessage":"this Idempotency-Key was used with another request","field":"Idempotency-Key"}
        nexconn request id: 200
        nexconn request id reused: 400 {"code":1002,"errorMessage":"this X-Request-ID was used with another request","field":"X-Request-ID"}
        nim catching up: 200 Retry-After=5 {"code":500,"desc":"the node is catching up with its log; try again shortly"}
        nim no credentials: 200 {"code":414,"desc":"sign the request (App-Key/Nonce/Timestamp/Signature, AppKey/Nonce/CurTime/CheckSum, or X-Roomcast-*)","field":"headers"}
        nim bad signature: 200 {"code":414,"desc":"signature mismatch","field":"CheckSum"}
        nim first nonce: 200
        nim replayed nonce: 200 {"code":431,"desc":"nonce already used","field":"Nonce"}
        nim bad key: 200 {"code":414,"desc":"Idempotency-Key is 1 to 255 visible ASCII characters","field":"Idempotency-Key"}
        nim keyed: 200
        nim keyed again: 200 Idempotent-Replayed=true same=true
        nim key reused: 200 {"code":414,"desc":"this Idempotency-Key was used with another request","field":"Idempotency-Key"}
        nim request id: 200
        nim request id reused: 200 {"code":200,"desc":{"success":true}}
        native rate limited: 429 Retry-After=1 {"code":42901,"message":"the app's REST rate limit (calls per second) was reached"}
        rongCloud rate limited: 429 Retry-After=1 {"code":1008,"errorMessage":"the app's REST rate limit (calls per second) was reached"}
        nexconn rate limited: 429 Retry-After=1 {"code":1008,"errorMessage":"the app's REST rate limit (calls per second) was reached"}
        nim rate limited: 200 Retry-After=1 {"code":416,"desc":"the app's REST rate limit (calls per second) was reached"}
        """
}
