import Foundation
@testable import Gateway
import HTTP1
import Server
import Testing
import Wire

/// The native route table (`NativeRoute.all`) is the one list of native routes: the gateway binds
/// exactly one handler to each entry through its signed route group, registers no `/v1` route
/// besides, and the OpenAPI document describes exactly the table's operations.
@Suite("Route table")
struct RouteTableTests {
    static func name(_ method: HTTPMethod, _ path: String) -> String { "\(method.rawValue) \(path)" }
    /// OP-1, OP-2: the operator API's paths.
    static func isOperator(_ path: String) -> Bool { path.hasPrefix("/v1/admin/") }

    @Test func theTableListsEachRouteOnce() {
        let names = NativeRoute.all.map { Self.name($0.method, $0.path) }
        #expect(Set(names).count == names.count, "listed twice: \(Dictionary(grouping: names) { $0 }.filter { $0.value.count > 1 }.keys.sorted())")
        #expect(NativeRoute.all.allSatisfy { $0.path.hasPrefix("/v1/") })
        // Operation ids name one operation each (stateful testing's links go by them).
        let ids = NativeRoute.all.compactMap(\.doc.operationId)
        #expect(Set(ids).count == ids.count)
    }

    @Test func everyEntryHasExactlyOneSignedHandlerAndNoV1RouteIsOutsideTheTable() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let registered = g.core.router.registrations
        let native = RESTSurface.native.name

        // Each entry once, through the native signed group (a second registration of the same
        // method and path would replace the first handler silently, so it is counted here).
        let bound = registered.filter { $0.group == native }.map { Self.name($0.method, $0.path) }
        let table = NativeRoute.all.map { Self.name($0.method, $0.path) }
        let counts = Dictionary(grouping: bound) { $0 }.mapValues(\.count)
        #expect(table.filter { counts[$0] != 1 }.isEmpty, "not bound exactly once: \(table.filter { counts[$0] != 1 })")
        #expect(Set(bound).subtracting(table).isEmpty, "bound outside the table: \(Set(bound).subtracting(table).sorted())")

        // No `/v1` route besides the table's (signed routes can only be registered through a
        // group, which names its routes by table entry; an unsigned one would show up here).
        // (The operator API, `/v1/admin/…`, is a surface of its own: guarded by the operator's
        // bearer token, not signed by an app; OperatorAPITests cover it.)
        let outside = registered.filter { $0.path.hasPrefix("/v1/") && !Self.isOperator($0.path) && $0.group != native }
            .map { Self.name($0.method, $0.path) }
        #expect(outside.isEmpty, "/v1 routes outside the table: \(outside)")

        // Each vendor's endpoints, once each, through that vendor's signed group.
        for vendor in Vendor.allCases {
            let paths = registered.filter { $0.group == RESTSurface.vendor(vendor).name }
            #expect(paths.allSatisfy { $0.method == .POST })
            #expect(paths.map(\.path).sorted() == vendor.endpoints.map(\.path).sorted(), "\(vendor)")
        }
        // Nothing else is registered twice either.
        let all = registered.map { Self.name($0.method, $0.path) }
        #expect(Set(all).count == all.count)
    }

    @Test func theDocumentDescribesTheTable() throws {
        let document = try #require(try JSONSerialization.jsonObject(with: Data(OpenAPIDocument.json.utf8)) as? [String: Any])
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        var described: [String] = []
        for (path, item) in paths where path.hasPrefix("/v1/") && !Self.isOperator(path) {
            for method in item.keys { described.append(Self.name(HTTPMethod(method.uppercased()), path)) }
        }
        #expect(described.sorted() == NativeRoute.all.map { Self.name($0.method, $0.path) }.sorted())
    }
}
