import Foundation
import Testing
@testable import Wire

/// The JavaScript client (`clients/js/roomcast.js`, BX-4) is one dependency-free file served as
/// it is, so it spells out its own close codes, the codes it does not reconnect after and the
/// protocol's event names. These keep each of those lists equal to the Wire table it comes from,
/// both ways (nothing missing, nothing extra), and the type declarations equal to the library, so
/// a change to one side alone fails here.
@Suite("Client library tables")
struct ClientTableTests {
    static let clientDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("clients").appendingPathComponent("js")

    /// 1006 is the code a browser reports when the connection ends without a close frame; the
    /// server never sends it (RFC 6455 §7.4.1), so it is in the client's table and not in Wire's.
    static let clientOnlyCloseCodes: Set<Int> = [1006]

    static func source(_ name: String) throws -> String {
        try String(contentsOf: clientDirectory.appendingPathComponent(name), encoding: .utf8)
    }

    /// The text between `start` and the first `end` after it.
    static func section(_ text: String, from start: String, to end: String) throws -> Substring {
        let head = try #require(text.range(of: start), "no \(start)")
        let tail = try #require(text.range(of: end, range: head.upperBound..<text.endIndex), "no \(end) after \(start)")
        return text[head.upperBound..<tail.lowerBound]
    }

    /// `name: 1000` pairs of an object literal (JavaScript) or an object type (TypeScript).
    static func namedNumbers(_ text: Substring) -> [String: Int] {
        var pairs: [String: Int] = [:]
        for match in text.matches(of: /([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([0-9]+)/) {
            pairs[String(match.1)] = Int(match.2)
        }
        return pairs
    }

    static func numbers(_ text: Substring) -> [Int] {
        text.matches(of: /[0-9]+/).compactMap { Int($0.output) }
    }

    /// The single-quoted strings of a list.
    static func quoted(_ text: Substring) -> [String] {
        text.matches(of: /'([^']*)'/).map { String($0.1) }
    }

    /// Whether two lists hold the same items once each; the message names what is missing and extra.
    static func expectSame<T: Hashable & Comparable>(_ client: [T], _ table: [T], _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let missing = Set(table).subtracting(client).sorted(), extra = Set(client).subtracting(table).sorted()
        #expect(missing.isEmpty && extra.isEmpty, "\(what): missing \(missing), extra \(extra)", sourceLocation: sourceLocation)
        #expect(Set(client).count == client.count, "\(what): an item is listed twice", sourceLocation: sourceLocation)
    }

    static var library: String { get throws { try source("roomcast.js") } }

    @Test func closeCodesAreWiresCloseCodes() throws {
        let codes = Self.namedNumbers(try Self.section(try Self.library, from: "export const CloseCode = Object.freeze({", to: "});"))
        #expect(!codes.isEmpty)
        Self.expectSame(codes.values.filter { !Self.clientOnlyCloseCodes.contains($0) }, CloseCode.allCases.map { Int($0.rawValue) }, "roomcast.js CloseCode against Wire's CloseCode")
        for code in Self.clientOnlyCloseCodes {
            #expect(codes.values.contains(code), "roomcast.js CloseCode lacks the client-only \(code)")
            #expect(CloseCode(rawValue: UInt16(code)) == nil, "\(code) is sent by the server now: take it out of clientOnlyCloseCodes")
        }
    }

    @Test func noReconnectCodesAreTheReconnectNeverRows() throws {
        let codes = Self.numbers(try Self.section(try Self.library, from: "export const NO_RECONNECT_CLOSE_CODES = Object.freeze([", to: "]);"))
        Self.expectSame(codes, CloseCode.allCases.filter { $0.reconnect == .never }.map { Int($0.rawValue) }, "roomcast.js NO_RECONNECT_CLOSE_CODES against Reconnect.never")
    }

    @Test func eventNamesAreTheProtocolsEvents() throws {
        let names = Self.quoted(try Self.section(try Self.library, from: "export const EVENT_NAMES = Object.freeze([", to: "]);"))
        Self.expectSame(names, WebSocketDocument.events.map(\.ev), "roomcast.js EVENT_NAMES against websocket.md's events")
    }

    /// The declarations a TypeScript user compiles against say the same as the library.
    @Test func declarationsMatchTheLibrary() throws {
        let declarations = try Self.source("roomcast.d.ts")
        let declared = Self.namedNumbers(try Self.section(declarations, from: "export declare const CloseCode: Readonly<{", to: "}>;"))
        let library = Self.namedNumbers(try Self.section(try Self.library, from: "export const CloseCode = Object.freeze({", to: "});"))
        #expect(declared == library, "roomcast.d.ts CloseCode \(declared.sorted { $0.value < $1.value }) against roomcast.js \(library.sorted { $0.value < $1.value })")
        let eventMap = try Self.section(declarations, from: "export interface ServerEventMap {", to: "\n}")
        let declaredEvents = eventMap.matches(of: /^\s*'([^']+)'\s*:/.anchorsMatchLineEndings()).map { String($0.1) }
        Self.expectSame(declaredEvents, WebSocketDocument.events.map(\.ev), "roomcast.d.ts ServerEventMap against websocket.md's events")
    }
}
