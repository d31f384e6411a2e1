import HTTP1
import Reactor
import WebSocket
#if canImport(Glibc)
import Glibc
#endif

/// What a benchmark client connection reports.
protocol WSClientDelegate: AnyObject {
    func clientDidOpen(_ client: WSClientConnection)
    func client(_ client: WSClientConnection, didReceive message: WebSocketMessageAssembler.Event)
    func clientDidFail(_ client: WSClientConnection, reason: String)
}

/// A non-blocking WebSocket client on our own reactor: connect, upgrade, then read frames.
/// Used by roomcast-bench to hold thousands of connections from one thread.
final class WSClientConnection: EventHandler {
    enum State {
        case connecting
        case handshaking
        case open
        case closed
    }

    let loop: EventLoop
    let id: Int
    private(set) var fd: Int32 = -1
    private var registration: RegistrationID?
    private(set) var state: State = .connecting
    private let request: [UInt8]
    private var inbound: [UInt8] = []
    private var assembler = WebSocketMessageAssembler(role: .client, maxMessageBytes: 16 << 20)
    private var output = OutboundQueue()
    weak var delegate: WSClientDelegate?
    /// Opaque per-connection data for the benchmark (e.g. the room it joined).
    var tag = 0

    init(loop: EventLoop, id: Int, host: String, port: UInt16, path: String, headers: [(String, String)] = []) {
        self.loop = loop
        self.id = id
        var r = "GET \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        r += "Sec-WebSocket-Key: \(base64Encode((0..<16).map { _ in UInt8.random(in: 0...255) }))\r\nSec-WebSocket-Version: 13\r\n"
        for (k, v) in headers { r += "\(k): \(v)\r\n" }
        r += "\r\n"
        request = Array(r.utf8)
    }

    /// `receiveBuffer`: SO_RCVBUF for the socket (a slow reader's small window), set before any
    /// data arrives; nil leaves the kernel's default (autotuned).
    func start(address: Socket.Address, source: String? = nil, receiveBuffer: Int32? = nil) {
        do {
            let (fd, connected) = try Socket.connect(to: address, source: source)
            self.fd = fd
            Socket.setNoDelay(fd)
            if let receiveBuffer { Socket.setBufferSizes(fd, receive: receiveBuffer, send: 16 * 1024) }
            registration = try loop.register(fd: fd, events: EventLoop.writable | EventLoop.readable, handler: self)
            if connected { sendHandshake() }
        } catch {
            fail("connect: \(error)")
        }
    }

    override func handleEvent(_ events: UInt32) {
        if state == .connecting {
            let err = Socket.pendingError(fd)
            if err != 0 {
                fail("connect: errno \(err)")
                return
            }
            sendHandshake()
            return
        }
        if events & EventLoop.writable != 0, !output.isEmpty {
            do {
                if try output.flush(fd: fd, iovecs: loop.iovecs) == .drained { updateInterest() }
            } catch {
                fail("write: \(error)")
                return
            }
        }
        // A paced connection is not registered for reading: only a hang-up or an error comes
        // here, and then what is left is read at once (to learn why the server closed).
        if events & (EventLoop.readable | EventLoop.hangup | EventLoop.error) != 0 { readAvailable() }
    }

    /// A slow reader: while paced, the connection is not read when data arrives; its owner reads
    /// it with `readPaced(upTo:)` (from a timer), so the server sees a client that reads slowly.
    private(set) var paced = false

    func setPaced(_ on: Bool) {
        guard paced != on, state != .closed else { return }
        paced = on
        updateInterest()
    }

    /// Reads at most `limit` bytes now (a paced reader's share); returns how many it read.
    @discardableResult
    func readPaced(upTo limit: Int) -> Int {
        guard state == .open, limit > 0 else { return 0 }
        return readAvailable(limit: limit)
    }

    /// Readable unless paced; writable while output is queued.
    private func updateInterest() {
        guard let r = registration, state != .connecting else { return }
        loop.modify(r, events: (paced ? 0 : EventLoop.readable) | (output.isEmpty ? 0 : EventLoop.writable))
    }

    private func sendHandshake() {
        state = .handshaking
        updateInterest()
        write(request)
    }

    func write(_ bytes: [UInt8]) {
        guard state != .closed else { return }
        if output.isEmpty {
            let result = bytes.withUnsafeBytes { try? Socket.write(fd, $0) }
            switch result {
            case .processed(let n)? where n == bytes.count: return
            case .processed(let n)?: output.append(ByteBlock.from(bytes[n...]))
            case .wouldBlock?: output.append(ByteBlock.from(bytes))
            case nil:
                fail("write failed")
                return
            }
            updateInterest()
        } else {
            output.append(ByteBlock.from(bytes))
        }
    }

    /// Sends a masked text message.
    func sendText(_ bytes: [UInt8]) {
        write(WebSocketFrameEncoder.frame(opcode: .text, payload: bytes, maskKey: UInt32.random(in: 1...UInt32.max)))
    }

    @discardableResult
    private func readAvailable(limit: Int = .max) -> Int {
        let buffer = limit < loop.readBuffer.count ? UnsafeMutableRawBufferPointer(rebasing: loop.readBuffer[0..<limit]) : loop.readBuffer
        let result: IOResult<Int>
        do {
            result = try Socket.read(fd, into: buffer)
        } catch {
            fail("read: \(error)")
            return 0
        }
        switch result {
        case .wouldBlock: return 0
        case .processed(0):
            fail("server closed the connection")
            return 0
        case .processed(let n):
            if state == .handshaking {
                inbound.append(contentsOf: buffer[0..<n])
                guard let end = headerSectionEnd(inbound) else { return n }
                guard inbound.starts(with: Array("HTTP/1.1 101".utf8)) else {
                    fail("upgrade refused: " + String(decoding: inbound.prefix(80), as: UTF8.self))
                    return n
                }
                var rest = Array(inbound[(end + 4)...])
                inbound = []
                state = .open
                delegate?.clientDidOpen(self)
                if !rest.isEmpty { rest.withUnsafeMutableBytes { frames($0) } }
            } else {
                frames(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n]))
            }
            return n
        }
    }

    private func frames(_ bytes: UnsafeMutableRawBufferPointer) {
        var offset = 0
        while offset <= bytes.count, state == .open {
            let (step, used) = assembler.parse(UnsafeMutableRawBufferPointer(rebasing: bytes[offset...]))
            offset += used
            switch step {
            case .needMoreData: return
            case .error(let e):
                fail("bad frame: \(e)")
                return
            case .event(.ping(let p)):
                write(WebSocketFrameEncoder.frame(opcode: .pong, payload: p, maskKey: 0x0102_0304))
            case .event(.close(let code, let reason)):
                fail("closed by server: \(code?.rawValue ?? 0) \(reason)")
                return
            case .event(let event):
                delegate?.client(self, didReceive: event)
            }
        }
    }

    func fail(_ reason: String) {
        guard state != .closed else { return }
        state = .closed
        close()
        delegate?.clientDidFail(self, reason: reason)
    }

    func close() {
        if let r = registration { loop.deregister(r) }
        registration = nil
        if fd >= 0 { closeDescriptor(fd) }
        fd = -1
        state = .closed
    }
}
