#if canImport(Glibc)
import Glibc
#endif

/// A failed system call: the call's name and the errno it left. Only `syscall(_:_:)` creates one,
/// so no other code in the project reads `errno` (ARCHITECTURE §7.5).
public struct SyscallError: Error, Equatable, CustomStringConvertible, Sendable {
    public let call: String
    public let errno: Int32

    public init(call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    public var description: String {
        "\(call) failed: \(String(cString: strerror(errno))) (errno \(errno))"
    }

    /// The peer went away; not worth logging at error level.
    public var isDisconnect: Bool {
        errno == ECONNRESET || errno == EPIPE || errno == ENOTCONN || errno == ETIMEDOUT
    }
}

/// What a non-blocking call produced: a value, or "try again when the fd is ready".
public enum IOResult<Value: Equatable & Sendable>: Equatable, Sendable {
    case processed(Value)
    case wouldBlock
}

/// The one place that interprets `errno`.
///
/// Policy: `EINTR` is retried; `EAGAIN`/`EWOULDBLOCK` become `.wouldBlock`; anything else is a
/// `SyscallError` naming the call.
@inline(__always)
public func syscall<T: FixedWidthInteger & Sendable>(
    _ call: StaticString, _ body: () -> T
) throws(SyscallError) -> IOResult<T> {
    while true {
        let result = body()
        if result >= 0 { return .processed(result) }
        let err = Glibc.errno
        switch err {
        case EINTR: continue
        case EAGAIN, EWOULDBLOCK: return .wouldBlock
        default: throw SyscallError(call: call.description, errno: err)
        }
    }
}

/// For calls that must not report "would block" (socket setup, epoll_ctl, close): any failure throws.
@inline(__always)
@discardableResult
public func syscallChecked<T: FixedWidthInteger & Sendable>(
    _ call: StaticString, _ body: () -> T
) throws(SyscallError) -> T {
    while true {
        let result = body()
        if result >= 0 { return result }
        let err = Glibc.errno
        if err == EINTR { continue }
        throw SyscallError(call: call.description, errno: err)
    }
}
