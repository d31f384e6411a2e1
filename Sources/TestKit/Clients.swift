import Foundation
import WebSocket
#if canImport(Glibc)
import Glibc
#endif

/// A blocking TCP client with timeouts, for black-box tests.
public final class TCPClient {
    public let fd: Int32
    private(set) var buffer: [UInt8] = []

    /// `receiveBuffer` shrinks the socket's receive buffer before connecting (to play a client
    /// that reads slowly).
    public init(port: UInt16, host: String = "127.0.0.1", timeout: Double = 5, receiveBuffer: Int32? = nil) throws {
        // Connected before `fd` is set: an initializer that throws once every property is set
        // still runs `deinit`, so closing there and here would close the descriptor twice, and
        // the second close could hit another thread's new connection that reused the number
        // (whose requests then went out on a third thread's socket).
        fd = try Self.connect(port: port, host: host, receiveBuffer: receiveBuffer)
        setTimeout(timeout)
    }

    /// A connected socket, or an error with nothing left open.
    private static func connect(port: UInt16, host: String, receiveBuffer: Int32?) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestKitError.protocolError("socket failed: errno \(errno)") }
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr(host)
        addr.sin_port = port.bigEndian
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            let e = errno
            close(fd)
            throw TestKitError.protocolError("connect to \(port) failed: errno \(e)")
        }
        return fd
    }

    deinit { close(fd) }

    /// The connection drops (both directions shut down); the descriptor is closed with the client.
    public func shutdown() { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }

    public func setTimeout(_ seconds: Double) {
        var tv = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    public func send(_ bytes: [UInt8]) throws {
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw TestKitError.protocolError("send failed: errno \(errno)") }
            off += n
        }
    }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Reads more bytes into the buffer; returns false on EOF. Throws on timeout.
    @discardableResult
    public func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n == 0 { return false }
        if n < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK { throw TestKitError.timeout("read") }
            if errno == ECONNRESET { return false }
            throw TestKitError.protocolError("recv errno \(errno)")
        }
        buffer.append(contentsOf: chunk[0..<n])
        return true
    }

    public var hasBufferedData: Bool { !buffer.isEmpty }

    /// What is buffered, reading once first if nothing is; empty at EOF. Throws on timeout.
    public func readSome() throws -> [UInt8] {
        if buffer.isEmpty { _ = try fill() }
        defer { buffer.removeAll() }
        return buffer
    }

    /// True if the socket has data (or EOF) within the time given.
    public func poll(milliseconds: Int32) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return Glibc.poll(&p, 1, milliseconds) > 0
    }

    /// Takes `n` buffered bytes, reading as needed.
    public func read(exactly n: Int) throws -> [UInt8] {
        while buffer.count < n {
            guard try fill() else { throw TestKitError.protocolError("EOF after \(buffer.count) of \(n) bytes") }
        }
        let out = Array(buffer[0..<n])
        buffer.removeFirst(n)
        return out
    }

    /// True if the peer closes (EOF or reset) within the timeout with no further data.
    public func waitForClose(timeout: Double = 5) -> Bool {
        setTimeout(timeout)
        do {
            while try fill() { buffer.removeAll() }
            return true
        } catch {
            return false
        }
    }

    public struct HTTPResponse {
        public var status: Int
        public var headers: [(String, String)]
        public var body: [UInt8]
        public func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }
        public var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// Reads one response (Content-Length framed; no body for 1xx/204/304 or `headRequest`).
    public func readResponse(headRequest: Bool = false) throws -> HTTPResponse {
        while true {
            if let end = findHeaderEnd() {
                let headText = String(decoding: buffer[0..<end], as: UTF8.self)
                buffer.removeFirst(end + 4)
                var lines = headText.components(separatedBy: "\r\n")
                let statusLine = lines.removeFirst().split(separator: " ")
                guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
                    throw TestKitError.protocolError("bad status line: \(headText)")
                }
                let headers = lines.compactMap { line -> (String, String)? in
                    guard let c = line.firstIndex(of: ":") else { return nil }
                    return (String(line[..<c]), line[line.index(after: c)...].trimmingCharacters(in: .whitespaces))
                }
                var response = HTTPResponse(status: status, headers: headers, body: [])
                if !headRequest && status >= 200 && status != 204 && status != 304 {
                    let length = Int(response.header("Content-Length") ?? "0") ?? 0
                    response.body = try read(exactly: length)
                }
                return response
            }
            guard try fill() else { throw TestKitError.protocolError("EOF before a complete response") }
        }
    }

    private func findHeaderEnd() -> Int? {
        guard buffer.count >= 4 else { return nil }
        for i in 0...(buffer.count - 4) where buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 {
            return i
        }
        return nil
    }
}

/// A WebSocket client over `TCPClient` (masks its frames, reads the server's).
public final class WSClient {
    public let tcp: TCPClient
    public let handshakeResponse: TCPClient.HTTPResponse

    public enum Frame: Equatable {
        case text(String)
        case binary([UInt8])
        case ping([UInt8])
        case pong([UInt8])
        case close(UInt16?, String)
    }

    /// Connects and upgrades; throws if the server does not answer 101.
    public init(port: UInt16, path: String = "/", headers: [String: String] = [:], timeout: Double = 5, receiveBuffer: Int32? = nil) throws {
        tcp = try TCPClient(port: port, timeout: timeout, receiveBuffer: receiveBuffer)
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        request += "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        for (k, v) in headers { request += "\(k): \(v)\r\n" }
        request += "\r\n"
        try tcp.send(request)
        handshakeResponse = try tcp.readResponse()
        guard handshakeResponse.status == 101 else {
            throw TestKitError.protocolError("upgrade refused: \(handshakeResponse.status) \(handshakeResponse.text)")
        }
    }

    public func send(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool = true) throws {
        try tcp.send(WebSocketFrameEncoder.frame(opcode: opcode, payload: payload, fin: fin, maskKey: UInt32.random(in: 0...UInt32.max)))
    }

    public func sendText(_ s: String) throws { try send(.text, Array(s.utf8)) }

    /// Several text messages in one write (pipelined: the server reads them together).
    public func sendTexts(_ texts: [String]) throws {
        try tcp.send(texts.flatMap { WebSocketFrameEncoder.frame(opcode: .text, payload: Array($0.utf8), fin: true, maskKey: UInt32.random(in: 0...UInt32.max)) })
    }

    public func close(code: UInt16 = 1000) throws {
        try send(.close, [UInt8(code >> 8), UInt8(code & 0xFF)])
    }

    /// Reads the next frame (control frames included); messages here are single-frame.
    public func readFrame(timeout: Double = 5) throws -> Frame {
        tcp.setTimeout(timeout)
        var parser = WebSocketMessageAssembler(role: .client, maxMessageBytes: 64 << 20)
        while true {
            var buf = tcp.takeBuffer()
            var consumed = 0
            let step = buf.withUnsafeMutableBytes { raw -> WebSocketMessageAssembler.Step in
                let (s, used) = parser.parse(raw)
                consumed = used
                return s
            }
            tcp.putBack(Array(buf[consumed...]))
            switch step {
            case .event(.text(let b)): return .text(String(decoding: b, as: UTF8.self))
            case .event(.binary(let b)): return .binary(b)
            case .event(.ping(let b)): return .ping(b)
            case .event(.pong(let b)): return .pong(b)
            case .event(.close(let code, let reason)): return .close(code?.rawValue, reason)
            case .error(let e): throw TestKitError.protocolError("bad frame from server: \(e)")
            case .needMoreData:
                // The assembler keeps partial state; feed it more.
                guard try tcp.fill() else { throw TestKitError.protocolError("EOF while reading a frame") }
                buf = []
            }
        }
    }

    /// Reads frames until a text message arrives (skipping pings), with a timeout.
    public func readText(timeout: Double = 5) throws -> String {
        while true {
            switch try readFrame(timeout: timeout) {
            case .text(let s): return s
            case .ping, .pong: continue
            case let other: throw TestKitError.protocolError("expected text, got \(other)")
            }
        }
    }
}

extension TCPClient {
    func takeBuffer() -> [UInt8] {
        let b = buffer
        buffer = []
        return b
    }
    func putBack(_ bytes: [UInt8]) {
        buffer = bytes + buffer
    }
}
