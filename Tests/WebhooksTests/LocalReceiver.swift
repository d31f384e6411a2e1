import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A webhook receiver on 127.0.0.1 for the delivery tests: HTTP/1.1 with keep-alive, every request
/// recorded with the moment it arrived. It answers 204 at once, or, stalled, reads requests and never
/// answers (the sender's timeout ends each attempt).
final class LocalReceiver: Sendable {
    struct Request: Sendable {
        let target: String
        let headers: [String: String]
        let arrived: ContinuousClock.Instant
        /// Which of the receiver's connections carried it (accept order).
        let connection: Int
    }

    let port: UInt16
    let stalled: Bool
    private let listener: Int32
    private let recorded = Mutex<[Request]>([])
    /// Open client sockets (closed by `stop`) and how many were accepted.
    private let connections = Mutex<(open: Set<Int32>, accepted: Int)>(([], 0))
    private let closed = Atomic<Bool>(false)

    init(stalled: Bool = false) throws {
        self.stalled = stalled
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(s, 512) == 0 else {
            close(s)
            throw POSIXError(.EADDRINUSE)
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(s, $0, &len) } }
        listener = s
        port = UInt16(bigEndian: addr.sin_port)
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    var requests: [Request] { recorded.withLock { $0 } }
    var accepted: Int { connections.withLock { $0.accepted } }

    /// Waits (polling) until `condition` holds for the recorded requests.
    @discardableResult
    func wait(timeout: Duration = .seconds(10), until condition: ([Request]) -> Bool) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition(requests) { return true }
            usleep(5_000)
        }
        return condition(requests)
    }

    /// Stops accepting: the shutdown wakes the accept thread, which closes the listening socket
    /// itself (closing it here could let that thread accept on a number reused by another test).
    func stop() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        // The serving threads close their sockets once their reads fail.
        connections.withLock { for c in $0.open { shutdown(c, Int32(SHUT_RDWR)) } }
    }

    private func acceptLoop() {
        defer { close(listener) }
        while !closed.load(ordering: .acquiring) {
            let c = accept(listener, nil, nil)
            if c < 0 {
                if closed.load(ordering: .acquiring) { return }
                continue
            }
            let number = connections.withLock { state -> Int? in
                // Stopped meanwhile: the socket is not served.
                guard !closed.load(ordering: .acquiring) else { return nil }
                state.open.insert(c)
                state.accepted += 1
                return state.accepted
            }
            guard let number else {
                close(c)
                return
            }
            Thread.detachNewThread { [self] in serve(c, number) }
        }
    }

    private func serve(_ c: Int32, _ number: Int) {
        defer {
            connections.withLock { _ = $0.open.remove(c) }
            close(c)
        }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        func fill() -> Bool {
            let n = read(c, &chunk, chunk.count)
            if n <= 0 { return false }
            buffer += chunk[0..<n]
            return true
        }
        let crlf2: [UInt8] = [13, 10, 13, 10]
        while true {
            var headEnd: Int?
            while headEnd == nil {
                if buffer.count >= 4 { headEnd = (0...(buffer.count - 4)).first { Array(buffer[$0..<($0 + 4)]) == crlf2 } }
                if headEnd == nil && !fill() { return }
            }
            let end = headEnd!
            let lines = String(decoding: buffer[0..<end], as: UTF8.self).components(separatedBy: "\r\n")
            let requestLine = lines[0].split(separator: " ").map(String.init)
            guard requestLine.count >= 2 else { return }
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = String(line[line.index(after: colon)...].drop { $0 == " " })
            }
            let length = Int(headers["content-length"] ?? "0") ?? 0
            while buffer.count < end + 4 + length { if !fill() { return } }
            buffer.removeFirst(end + 4 + length)
            recorded.withLock { $0.append(Request(target: requestLine[1], headers: headers, arrived: .now, connection: number)) }
            if stalled {
                // Never answer: wait until the sender gives up (or the receiver stops).
                while fill() {}
                return
            }
            let response = Array("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n".utf8)
            if write(c, response, response.count) <= 0 { return }
        }
    }
}
