import Testing
@testable import Server

@Suite("Router's path table")
struct PathTableTests {
    /// Every stored path is found with its own value; paths that differ by a byte, a prefix or an
    /// extension are not; the table grows past its first size (probe runs wrap around its end).
    @Test(arguments: [0, 1, 3, 4, 5, 17, 300])
    func findsExactlyTheStoredPaths(count: Int) {
        var map: [String: Int] = [:]
        for i in 0..<count { map["/v\(i % 7)/room/\(i)/x"] = i }
        let table = PathTable(map)
        for (path, value) in map {
            #expect(table.value(for: path) == value)
            #expect(table.value(for: path + "/") == nil)
            #expect(table.value(for: String(path.dropLast())) == nil)
            #expect(table.value(for: path.uppercased()) == nil)
        }
        #expect(table.value(for: "") == nil)
        #expect(table.value(for: "/") == nil)
        #expect(table.value(for: "/v0/room/\(count)/x") == nil)
    }

    /// Paths longer than a small string and non-ASCII bytes hash and compare like any other.
    @Test func longAndNonASCIIPaths() {
        let long = "/" + String(repeating: "segment/", count: 40)
        let table = PathTable([long: 1, "/caf\u{e9}": 2, "/healthz": 3])
        #expect(table.value(for: long) == 1)
        #expect(table.value(for: "/caf\u{e9}") == 2)
        #expect(table.value(for: "/cafe\u{301}") == nil) // canonically equal, other bytes: a path is its bytes
        #expect(table.value(for: "/healthz") == 3)
    }
}
