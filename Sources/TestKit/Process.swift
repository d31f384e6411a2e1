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
public final class RunningProcess: @unchecked Sendable {
    // Safety: `process` is only used through its own thread-safe API; collected output is behind
    // `output` (a Mutex in a class).
    public let process: Process
    private final class Output: Sendable {
        let text = Mutex<String>("")
    }
    private let output = Output()
    private let outPipe = Pipe()

    public init(path: String, arguments: [String], environment: [String: String] = [:]) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env["SWIFT_BACKTRACE"] = "enable=no"
        for (k, v) in environment { env[k] = v }
        process.environment = env
        process.standardOutput = outPipe
        process.standardError = outPipe
        let sink = output
        outPipe.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty { return }
            sink.text.withLock { $0 += String(decoding: data, as: UTF8.self) }
        }
        try process.run()
    }

    public var log: String { output.text.withLock { $0 } }

    /// Waits until the output contains `text`; returns the output.
    @discardableResult
    public func waitForOutput(_ text: String, timeout: Double = 20) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let s = log
            if s.contains(text) { return s }
            if !process.isRunning { throw TestKitError.protocolError("process exited (\(process.terminationStatus)) before printing \(text):\n\(s)") }
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
            if !process.isRunning { throw TestKitError.protocolError("process exited early:\n\(log)") }
            usleep(10_000)
        }
        throw TestKitError.timeout("no listening line:\n\(log)")
    }

    public func signal(_ sig: Int32) {
        kill(process.processIdentifier, sig)
    }

    /// Waits for exit and returns the status, or nil on timeout.
    public func waitForExit(timeout: Double = 20) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        return process.isRunning ? nil : process.terminationStatus
    }

    /// SIGKILL if still running (test cleanup).
    public func kill9() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            _ = waitForExit(timeout: 5)
        }
    }

    deinit {
        kill9()
        outPipe.fileHandleForReading.readabilityHandler = nil
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

/// A fresh temporary directory.
public func temporaryDirectory(_ prefix: String = "roomcast-test") -> String {
    let path = NSTemporaryDirectory() + "\(prefix)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}
