import Foundation
import Testing
import Wire

/// The writer's strings: runs that need no escape are copied at once; every string must still
/// come out as valid JSON that reads back as itself, with the same escapes as before.
@Suite("JSON writer strings")
struct JSONWriterTests {
    static func written(_ s: String) -> String {
        var w = JSONWriter()
        w.beginArray()
        w.string(s)
        w.endArray()
        return String(decoding: w.bytes, as: UTF8.self)
    }

    @Test func escapesAsBeforeAndReadsBack() throws {
        #expect(Self.written("plain") == #"["plain"]"#)
        #expect(Self.written("") == #"[""]"#)
        #expect(Self.written("a\"b\\c\nd\re\tf") == #"["a\"b\\c\nd\re\tf"]"#)
        #expect(Self.written("\u{0}\u{1}x\u{1f}") == #"["\u0000\u0001x\u001f"]"#)
        #expect(Self.written("\"") == #"["\""]"#)
        #expect(Self.written("end\\") == #"["end\\"]"#)
        #expect(Self.written("\u{7f}é中😀") == "[\"\u{7f}é中😀\"]")
        let cases = ["short", String(repeating: "long text ", count: 50), "\"\"\"", "a\u{2}b" + String(repeating: "é", count: 40) + "\n",
                     "mixed \"quotes\" and \\slashes\\ over a longer native string \u{8}"]
        for s in cases {
            let back = try JSONDecoder().decode([String].self, from: Data(Self.written(s).utf8))
            #expect(back == [s])
        }
    }
}
