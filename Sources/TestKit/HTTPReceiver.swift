import Foundation
import HTTP1
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A webhook receiver for tests: an HTTP/1.1 server on 127.0.0.1 (thread per connection,
/// keep-alive, Content-Length bodies) that records every request and answers with the status the
/// test chooses.
public final class HTTPReceiver: @unchecked Sendable {
    // Safety: `requests` and `responder` are behind Mutexes; the listening socket is closed once.

    public struct Request: Sendable {
        public let method: String
        /// Path and query.
        public let target: String
        public let headers: [String: String]
        public let body: [UInt8]

        public func header(_ name: String) -> String? { headers[name.lowercased()] }
        public var json: Any? { try? JSONSerialization.jsonObject(with: Data(body)) }
        public var query: [String: String] {
            guard let q = target.split(separator: "?", maxSplits: 1).dropFirst().first else { return [:] }
            var out: [String: String] = [:]
            for pair in q.split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
                if kv.count == 2 { out[kv[0]] = kv[1].removingPercentEncoding ?? kv[1] }
            }
            return out
        }
    }

    public struct Answer: Sendable {
        public var status: Int
        /// Held before answering (to play a slow receiver).
        public var delay: Double
        public var body: [UInt8]
        public init(status: Int, delay: Double = 0, body: [UInt8] = []) {
            self.status = status
            self.delay = delay
            self.body = body
        }
        /// A JSON answer (a before-send hook's verdict).
        public static func json(_ text: String, delay: Double = 0) -> Answer { Answer(status: 200, delay: delay, body: Array(text.utf8)) }
    }

    public let port: UInt16
    private let fd: Int32
    private let recorded = Mutex<[Request]>([])
    private let responder: Mutex<@Sendable (Request) -> Answer>
    private let closed = Atomic<Bool>(false)

    public init(_ respond: @escaping @Sendable (Request) -> Answer = { _ in Answer(status: 204) }) throws {
        responder = Mutex(respond)
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(s, 512) == 0 else {
            close(s)
            throw TestKitError.protocolError("receiver: bind/listen failed")
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(s, $0, &len) } }
        fd = s
        port = UInt16(bigEndian: addr.sin_port)
        let listener = fd
        Thread.detachNewThread { [self] in
            // This thread closes the listening socket when it ends (see `stop`).
            defer { close(listener) }
            while !closed.load(ordering: .acquiring) {
                let c = accept(listener, nil, nil)
                if c < 0 { if closed.load(ordering: .acquiring) { return } else { continue } }
                Thread.detachNewThread { [self] in serve(c) }
            }
        }
    }

    /// Stops accepting. Once, and without closing the listening socket: the shutdown wakes the
    /// accept thread, which closes it as it ends. Closing it here could let that thread call
    /// `accept` on the number after another test's socket reused it, and a second close could
    /// close that socket.
    public func stop() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        shutdown(fd, Int32(SHUT_RDWR))
    }

    public func respond(_ f: @escaping @Sendable (Request) -> Answer) { responder.withLock { $0 = f } }

    public var requests: [Request] { recorded.withLock { $0 } }

    public func url(_ path: String = "/hook") -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Waits until `condition` holds for the recorded requests.
    @discardableResult
    public func wait(timeout: Double = 10, until condition: ([Request]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition(requests) { return true }
            usleep(20_000)
        }
        return condition(requests)
    }

    private func serve(_ c: Int32) {
        defer { close(c) }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            // Head.
            var headEnd: Int?
            while headEnd == nil {
                if let r = headerSectionEnd(buffer) { headEnd = r; break }
                let n = read(c, &chunk, chunk.count)
                if n <= 0 { return }
                buffer += chunk[0..<n]
            }
            let head = String(decoding: buffer[0..<headEnd!], as: UTF8.self)
            let lines = head.components(separatedBy: "\r\n")
            let requestLine = lines[0].split(separator: " ").map(String.init)
            guard requestLine.count >= 2 else { return }
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            let length = Int(headers["content-length"] ?? "0") ?? 0
            let start = headEnd! + 4
            while buffer.count < start + length {
                let n = read(c, &chunk, chunk.count)
                if n <= 0 { return }
                buffer += chunk[0..<n]
            }
            let request = Request(method: requestLine[0], target: requestLine[1], headers: headers, body: Array(buffer[start..<(start + length)]))
            buffer.removeFirst(start + length)
            recorded.withLock { $0.append(request) }
            let answer = responder.withLock { $0 }(request)
            if answer.delay > 0 { usleep(UInt32(answer.delay * 1_000_000)) }
            let response = Array("HTTP/1.1 \(answer.status) X\r\nContent-Length: \(answer.body.count)\r\n\r\n".utf8) + answer.body
            if write(c, response, response.count) <= 0 { return }
        }
    }
}
