import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Test support only: black-box tests start the built binaries and talk to them over sockets.

public enum TestKitError: Error, CustomStringConvertible {
    case binaryNotFound(String)
    case timeout(String)
    case protocolError(String)
    public var description: String {
        switch self {
        case .binaryNotFound(let s): return "binary not found: \(s) (run `swift build` first)"
        case .timeout(let s): return "timed out: \(s)"
        case .protocolError(let s): return "protocol error: \(s)"
        }
    }
}

/// The path of a product built next to the running test bundle (e.g. `.build/debug/roomcast`).
public func productPath(_ name: String) throws -> String {
    var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
    }
    // The xctest bundle may sit inside the bin directory or one level deeper.
    for candidate in [dir, dir.deletingLastPathComponent(), dir.deletingLastPathComponent().deletingLastPathComponent()] {
        let path = candidate.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    throw TestKitError.binaryNotFound(name)
}

/// A child process whose stdout/stderr are collected; started and stopped by tests.
///
/// Started with `posix_spawn` rather than Foundation's `Process`: `Process.run()` on Linux (Swift
/// 6.3) over-reads `/proc/self/fd` entries and crashed the test run now and then
/// (swift-corelibs-foundation PR 5472). The child gets no descriptor of the test process but its
/// output pipe (`spawnClosingInherited`).
public final class RunningProcess: @unchecked Sendable {
    // Safety: `processIdentifier` is immutable; the exit status (and reaping) and the collected
    // output are behind Mutexes; the reader thread only appends to the output.
    public let processIdentifier: pid_t
    private final class Output: Sendable {
        let text = Mutex<String>("")
        /// The pipe reached its end (the child and everything it started closed it).
        let ended = Mutex<Bool>(false)
    }
    private let output = Output()
    private let exit = Mutex<Int32?>(nil)

    public init(path: String, arguments: [String], environment: [String: String] = [:]) throws {
        var env = ProcessInfo.processInfo.environment
        env["SWIFT_BACKTRACE"] = "enable=no"
        for (k, v) in environment { env[k] = v }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw TestKitError.protocolError("pipe failed") }
        let pid: pid_t
        do {
            pid = try spawnClosingInherited(path, arguments, environment: env.map { "\($0.key)=\($0.value)" }, stdout: fds[1])
        } catch {
            close(fds[0])
            close(fds[1])
            throw error
        }
        close(fds[1])
        processIdentifier = pid
        let readEnd = fds[0]
        let sink = output
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                let text = String(decoding: buffer[0..<n], as: UTF8.self)
                sink.text.withLock { $0 += text }
            }
            close(readEnd)
            sink.ended.withLock { $0 = true }
        }
        reader.start()
    }

    /// Everything the process printed so far (stdout and stderr).
    public var log: String { output.text.withLock { $0 } }

    /// Reaps the child if it has exited (never blocks).
    private func reap() -> Int32? {
        exit.withLock { status in
            if status == nil {
                var raw: Int32 = 0
                if waitpid(processIdentifier, &raw, WNOHANG) == processIdentifier {
                    // As Foundation reports it: the exit code, or the signal that ended it.
                    status = (raw & 0x7F) == 0 ? (raw >> 8) & 0xFF : raw & 0x7F
                }
            }
            return status
        }
    }

    public var isRunning: Bool { reap() == nil }

    /// Waits for the process to exit and its output to end; the exit status (nil on timeout)
    /// and everything it printed.
    public func finish(timeout: Double = 60) -> (status: Int32?, log: String) {
        (waitForExit(timeout: timeout), log)
    }

    /// The exit code, or the signal that ended the process (-1 while it runs).
    public var terminationStatus: Int32 { reap() ?? -1 }

    /// Waits until the output contains `text`; returns the output.
    @discardableResult
    public func waitForOutput(_ text: String, timeout: Double = 20) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let s = log
            if s.contains(text) { return s }
            if !isRunning { throw TestKitError.protocolError("process exited (\(terminationStatus)) before printing \(text):\n\(s)") }
            usleep(10_000)
        }
        throw TestKitError.timeout("waiting for '\(text)' in output:\n\(log)")
    }

    /// The port from a "listening on http://host:PORT" (or ws://) line.
    public func waitForPort(timeout: Double = 20) throws -> UInt16 {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            for line in log.split(separator: "\n") where line.contains("listening on ") {
                if let url = line.split(separator: " ").last,
                   let portText = url.split(separator: ":").last?.split(separator: "/").first,
                   let port = UInt16(portText) { return port }
            }
            if !isRunning { throw TestKitError.protocolError("process exited early:\n\(log)") }
            usleep(10_000)
        }
        throw TestKitError.timeout("no listening line:\n\(log)")
    }

    public func signal(_ sig: Int32) {
        kill(processIdentifier, sig)
    }

    /// Waits for exit and returns the status, or nil on timeout.
    public func waitForExit(timeout: Double = 20) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning && Date() < deadline { usleep(10_000) }
        if isRunning { return nil }
        // What it printed before exiting is in `log` once this returns (the pipe's end, or 2 s
        // if a child it started still holds the pipe).
        let drained = Date().addingTimeInterval(2)
        while !output.ended.withLock({ $0 }) && Date() < drained { usleep(2_000) }
        return terminationStatus
    }

    /// SIGKILL if still running (test cleanup).
    public func kill9() {
        if isRunning {
            kill(processIdentifier, SIGKILL)
            _ = waitForExit(timeout: 5)
        }
    }

    deinit {
        kill9()
    }
}

/// A free TCP port on 127.0.0.1 (bound and released; fine for tests).
public func freePort() -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = 0
    _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
    return UInt16(bigEndian: addr.sin_port)
}

/// The one folder of this test process under the system's temporary directory: every
/// `temporaryDirectory` is made in it, and it is removed when the process exits. A run that did
/// not exit (killed, crashed) leaves its folder; the next run removes the folders of processes
/// that no longer exist. So a `swift test` run leaves nothing behind in the temporary directory.
public let testScratchRoot: String = {
    let base = NSTemporaryDirectory()
    let prefix = "roomcast-tests-"
    for name in (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? [] where name.hasPrefix(prefix) {
        // kill(pid, 0) fails with ESRCH only for a process that no longer exists.
        if let pid = Int32(name.dropFirst(prefix.count)), kill(pid, 0) != 0 && errno == ESRCH {
            try? FileManager.default.removeItem(atPath: base + name)
        }
    }
    let root = base + prefix + "\(getpid())"
    try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    atexit { try? FileManager.default.removeItem(atPath: testScratchRoot) }
    return root
}()

/// A fresh temporary directory (inside `testScratchRoot`, so it is removed when the test process
/// exits even if the test does not remove it).
public func temporaryDirectory(_ prefix: String = "roomcast-test") -> String {
    let path = testScratchRoot + "/\(prefix)-\(UInt32.random(in: 0...UInt32.max))"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// `posix_spawn`s `path` with stdin from /dev/null, stdout and stderr to `stdout` (or /dev/null),
/// and every other descriptor of this process closed in the child (glibc's
/// `posix_spawn_file_actions_addclosefrom_np`, looked up at run time: Swift's Glibc module does
/// not declare it), so a child never holds a test's sockets open.
public func spawnClosingInherited(_ path: String, _ arguments: [String], environment: [String]? = nil, stdout: Int32? = nil) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    if let stdout {
        posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        posix_spawn_file_actions_adddup2(&actions, stdout, 2)
    } else {
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    }
    typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
        _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
    }
    let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for a in argv { free(a) } }
    let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup($0) } + [nil] }
    defer { for e in envp ?? [] { free(e) } }
    var pid: pid_t = 0
    let spawned = envp.map { e in e.withUnsafeBufferPointer { posix_spawn(&pid, path, &actions, nil, argv, $0.baseAddress) } }
        ?? posix_spawn(&pid, path, &actions, nil, argv, environ)
    guard spawned == 0 else { throw TestKitError.protocolError("\(path): posix_spawn failed (\(spawned))") }
    return pid
}
