@testable import HTTP1

/// What a parser produced from a byte stream, independent of how the stream was split.
struct ParseOutcome: Equatable {
    var heads: [HTTPRequestHead] = []
    var bodies: [[UInt8]] = []
    var ends = 0
    var error: HTTPParserError?
}

/// Feeds `bytes` to a fresh parser in pieces of `chunk` bytes (nil: all at once) and collects
/// every event, concatenating body pieces per request.
func parse(_ bytes: [UInt8], chunk: Int? = nil, limits: HTTPLimits = HTTPLimits()) -> ParseOutcome {
    var parser = HTTPRequestParser(limits: limits)
    var out = ParseOutcome()
    var currentBody: [UInt8] = []
    var offset = 0
    let size = chunk ?? max(bytes.count, 1)
    outer: while offset < bytes.count {
        let piece = Array(bytes[offset..<min(offset + size, bytes.count)])
        offset += piece.count
        var used = 0
        while true {
            let (step, consumed): (HTTPRequestParser.Step, Int) = piece.withUnsafeBytes {
                parser.parse(UnsafeRawBufferPointer(rebasing: $0[used...]))
            }
            let base = used
            used += consumed
            switch step {
            case .needMoreData:
                precondition(used == piece.count, "needMoreData must consume everything")
                continue outer
            case .error(let e):
                out.error = e
                break outer
            case .event(.head(let h)):
                out.heads.append(h)
                currentBody = []
            case .event(.body(let r)):
                currentBody.append(contentsOf: piece[(base + r.lowerBound)..<(base + r.upperBound)])
            case .event(.end):
                out.bodies.append(currentBody)
                out.ends += 1
            }
        }
    }
    // Flush events that need no more bytes (e.g. the end of a body-less request).
    if out.error == nil {
        while true {
            let (step, _) = [UInt8]().withUnsafeBytes { parser.parse($0) }
            switch step {
            case .event(.end):
                out.bodies.append(currentBody)
                out.ends += 1
                continue
            case .event(.head(let h)):
                out.heads.append(h)
                currentBody = []
                continue
            case .error(let e):
                out.error = e
            default:
                break
            }
            break
        }
    }
    return out
}

func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }
