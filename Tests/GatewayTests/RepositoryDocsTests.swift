import Foundation
import Testing

/// The repository stands alone: every capability id a test names is explained in
/// docs/capabilities.md, and the README and docs/ link nowhere outside the repository.
@Suite("Repository documents")
struct RepositoryDocsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    func text(_ path: String) throws -> String {
        try String(contentsOf: Self.root.appendingPathComponent(path), encoding: .utf8)
    }

    /// Every `XX-N` capability id in the test sources.
    func idsNamedByTests() throws -> Set<String> {
        let pattern = try NSRegularExpression(pattern: #"\b(RC|UG|CS|NIM|ZIM|VC|WH|BX|PX|QS|AU|MO|TR|CL|OP)-[0-9]+\b"#)
        var ids = Set<String>()
        let tests = Self.root.appendingPathComponent("Tests")
        let files = FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL } ?? []
        for file in files where file.pathExtension == "swift" {
            let source = try String(contentsOf: file, encoding: .utf8)
            for m in pattern.matches(in: source, range: NSRange(source.startIndex..., in: source)) {
                if let r = Range(m.range, in: source) { ids.insert(String(source[r])) }
            }
        }
        return ids
    }

    @Test func everyCapabilityIdTheTestsNameIsExplained() throws {
        let table = try text("docs/capabilities.md")
        let ids = try idsNamedByTests()
        #expect(ids.count > 50)
        for id in ids.sorted() {
            #expect(table.contains("| \(id) | "), "\(id) is named by a test but has no row in docs/capabilities.md")
        }
    }

    @Test func theDocumentsLinkNowhereOutsideTheRepository() throws {
        for path in ["README.md", "docs/capabilities.md", "docs/architecture.md", "CLUSTER.md", "BENCHMARKS.md"] {
            let doc = try text(path)
            #expect(!doc.contains("../shared") && !doc.contains("](../.."), "\(path) points outside the repository")
        }
    }
}
