import CShims
#if canImport(Glibc)
import Glibc
#endif

/// Thin, typed helpers around the BSD socket calls the reactor needs. Every call goes through
/// `syscall`/`syscallChecked`, which own the errno policy.
public enum Socket {
    /// An IPv4 address and port.
    public struct Address: Equatable, Sendable, CustomStringConvertible {
        public var host: String
        public var port: UInt16
        public init(host: String, port: UInt16) {
            self.host = host
            self.port = port
        }
        public var description: String { "\(host):\(port)" }
    }

    public enum SetupError: Error, Equatable, CustomStringConvertible {
        case invalidAddress(String)
        public var description: String {
            switch self {
            case .invalidAddress(let host): return "not an IPv4 address: \(host)"
            }
        }
    }

    static func sockaddr(_ address: Address) throws -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = address.port.bigEndian
        let host = address.host == "localhost" ? "127.0.0.1" : address.host
        guard inet_pton(AF_INET, host, &addr.sin_addr) == 1 else {
            throw SetupError.invalidAddress(address.host)
        }
        return addr
    }

    /// A non-blocking listening TCP socket. With `reusePort`, several loops may bind the same port
    /// and the kernel spreads connections among them (SO_REUSEPORT).
    public static func listen(on address: Address, reusePort: Bool, backlog: Int32 = 4096) throws -> Int32 {
        var addr = try sockaddr(address)
        let fd = try syscallChecked("socket") {
            Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        }
        do {
            var one: Int32 = 1
            try syscallChecked("setsockopt(SO_REUSEADDR)") {
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            }
            if reusePort {
                try syscallChecked("setsockopt(SO_REUSEPORT)") {
                    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size))
                }
            }
            try syscallChecked("bind") {
                withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: Glibc.sockaddr.self, capacity: 1) {
                        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            }
            try syscallChecked("listen") { Glibc.listen(fd, backlog) }
        } catch {
            closeDescriptor(fd)
            throw error
        }
        return fd
    }

    /// A non-blocking outgoing TCP connection; completion is signalled by writability.
    /// Returns the fd and whether the connection is already established.
    public static func connect(to address: Address, source: String? = nil) throws -> (fd: Int32, connected: Bool) {
        var addr = try sockaddr(address)
        let fd = try syscallChecked("socket") {
            Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        }
        do {
            if let source {
                var src = try sockaddr(Address(host: source, port: 0))
                try syscallChecked("bind") {
                    withUnsafePointer(to: &src) {
                        $0.withMemoryRebound(to: Glibc.sockaddr.self, capacity: 1) {
                            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                        }
                    }
                }
            }
            let result = try syscall("connect") { () -> Int32 in
                withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: Glibc.sockaddr.self, capacity: 1) {
                        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            }
            if case .processed = result { return (fd, true) }
            return (fd, false)
        } catch let error as SyscallError where error.errno == EINPROGRESS {
            return (fd, false)
        } catch {
            closeDescriptor(fd)
            throw error
        }
    }

    /// A new socket of the given family/type/protocol, close-on-exec (for libraries that ask the
    /// caller to open their sockets, like curl's open-socket callback).
    public static func open(family: Int32, type: Int32, protocol proto: Int32) throws(SyscallError) -> Int32 {
        try syscallChecked("socket") { Glibc.socket(family, type | Int32(SOCK_CLOEXEC.rawValue), proto) }
    }

    /// The error pending on a socket (used after a non-blocking connect completes).
    public static func pendingError(_ fd: Int32) -> Int32 {
        var err: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
        return err
    }

    /// The local address of a bound socket (used to learn the port after binding port 0).
    public static func localAddress(_ fd: Int32) throws -> Address {
        var addr = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        try syscallChecked("getsockname") {
            withUnsafeMutablePointer(to: &addr) {
                $0.withMemoryRebound(to: Glibc.sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
            }
        }
        return Address(host: ipString(addr.sin_addr), port: UInt16(bigEndian: addr.sin_port))
    }

    static func ipString(_ inAddr: in_addr) -> String {
        var a = inAddr
        var buf = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        _ = inet_ntop(AF_INET, &a, &buf, socklen_t(INET_ADDRSTRLEN))
        return buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Accepts one pending connection (non-blocking, close-on-exec). `nil` when none is pending.
    public static func accept(_ listener: Int32) throws(SyscallError) -> (fd: Int32, peer: Address)? {
        var addr = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = try syscall("accept4") {
            withUnsafeMutablePointer(to: &addr) {
                $0.withMemoryRebound(to: Glibc.sockaddr.self, capacity: 1) {
                    cshims_accept4(listener, $0, &len, Int32(SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue))
                }
            }
        }
        switch result {
        case .wouldBlock: return nil
        case .processed(let fd):
            return (fd, Address(host: ipString(addr.sin_addr), port: UInt16(bigEndian: addr.sin_port)))
        }
    }

    public static func setNoDelay(_ fd: Int32) {
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Shrinks the kernel buffers of a socket (used by load generators holding many sockets).
    public static func setBufferSizes(_ fd: Int32, receive: Int32, send: Int32) {
        var r = receive, s = send
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &r, socklen_t(MemoryLayout<Int32>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &s, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Bytes in a TCP socket's kernel send queue that the peer has not acknowledged (nil when the
    /// kernel does not say): falling, the peer is reading.
    public static func unsentBytes(_ fd: Int32) -> Int? {
        let n = cshims_unsent_bytes(fd)
        return n >= 0 ? Int(n) : nil
    }

    /// Fixes a socket's kernel send buffer (which turns off its autotuning).
    public static func setSendBuffer(_ fd: Int32, bytes: Int) {
        var s = Int32(clamping: bytes)
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &s, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Reads into `buffer`. `.processed(0)` means the peer closed its side.
    @inline(__always)
    public static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SyscallError) -> IOResult<Int> {
        try syscall("read") { Glibc.read(fd, buffer.baseAddress, buffer.count) }
    }

    @inline(__always)
    public static func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) throws(SyscallError) -> IOResult<Int> {
        try syscall("write") { Glibc.write(fd, buffer.baseAddress, buffer.count) }
    }

    @inline(__always)
    public static func writev(_ fd: Int32, _ iov: UnsafePointer<iovec>, count: Int32) throws(SyscallError) -> IOResult<Int> {
        try syscall("writev") { Glibc.writev(fd, iov, count) }
    }

    /// Half-closes the write side (sends FIN) so a peer sees the end of our data before we close.
    public static func shutdownWrite(_ fd: Int32) {
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
    }
}

/// close(2) is never retried: on Linux the descriptor is released even when it reports EINTR.
public func closeDescriptor(_ fd: Int32) {
    _ = Glibc.close(fd)
}

/// The soft limit on open descriptors, raised to the hard limit (the idle-connection benchmark
/// and the fan-out benchmark hold thousands of sockets).
@discardableResult
public func raiseDescriptorLimit() -> Int {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
    return Int(limit.rlim_cur)
}
