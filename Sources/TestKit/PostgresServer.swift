import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A private PostgreSQL 15 for cluster tests (TOOLS.md §10): `initdb` into a temporary directory
/// and `pg_ctl start` on a free loopback port with trust authentication. PostgreSQL refuses to
/// run as root, so as root (a CI container) it runs as the `postgres` user through `runuser`.
/// Needs Debian's `postgresql` package (`scripts/install-deps.sh test`).
public final class PostgresServer: @unchecked Sendable {
    // Safety: every field is immutable after init; the server process is driven by pg_ctl.
    public let port: UInt16
    public let directory: String
    let bin: String
    let asPostgres: Bool
    public let user = "roomcast"

    /// libpq connection string for `database`.
    public func url(_ database: String = "postgres") -> String { "postgres://\(user)@127.0.0.1:\(port)/\(database)" }

    public init() throws {
        let candidates = ["/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"]
        guard let bin = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0 + "/pg_ctl") }) else {
            throw TestKitError.protocolError("PostgreSQL server binaries not found (install them: scripts/install-deps.sh test)")
        }
        self.bin = bin
        asPostgres = getuid() == 0
        directory = temporaryDirectory("roomcast-pg")
        port = freePort()
        if asPostgres { try Self.run("/bin/chown", ["-R", "postgres", directory]) }
        try run("initdb", ["-D", directory + "/data", "-A", "trust", "-U", user, "--no-sync", "-E", "UTF8", "--locale=C"])
        try start()
    }

    deinit {
        try? stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Starts (or restarts) the server and waits until it accepts connections.
    public func start() throws {
        try run("pg_ctl", ["-D", directory + "/data", "-l", directory + "/log", "-w", "-t", "30",
                           "-o", "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=off", "start"])
    }

    /// Stops it (fast shutdown: connections are closed).
    public func stop() throws {
        guard FileManager.default.fileExists(atPath: directory + "/data/postmaster.pid") else { return }
        try run("pg_ctl", ["-D", directory + "/data", "-m", "fast", "-w", "stop"])
    }

    /// Kills the whole server at once with SIGKILL, as a crash of its machine or container would:
    /// the postmaster and every process it started are stopped first, then killed, so no backend
    /// orphaned by the postmaster's death can still commit (and answer) after it. `start()` brings
    /// it back with its data.
    public func kill9() {
        guard let text = try? String(contentsOfFile: directory + "/data/postmaster.pid", encoding: .utf8),
              let pid = text.split(separator: "\n").first.flatMap({ Int32($0) }) else { return }
        let all = [pid] + Self.children(of: pid)
        for p in all { kill(p, SIGSTOP) }
        for p in all { kill(p, SIGKILL) }
        for p in all {
            for _ in 0..<100 {
                if Glibc.kill(p, 0) != 0 { break }
                usleep(20_000)
            }
        }
        try? FileManager.default.removeItem(atPath: directory + "/data/postmaster.pid")
    }

    /// The processes whose parent is `pid` (from /proc).
    static func children(of pid: Int32) -> [Int32] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { name -> Int32? in
            guard let child = Int32(name), let stat = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return nil }
            // "pid (comm) state ppid ...": the name may hold spaces and parentheses.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && Int32(fields[1]) == pid ? child : nil
        }
    }

    /// Creates a database owned by the test user.
    public func createDatabase(_ name: String) throws {
        try run("createdb", ["-h", "127.0.0.1", "-p", "\(port)", "-U", user, name])
    }

    private func run(_ tool: String, _ arguments: [String]) throws {
        if asPostgres {
            try Self.run("/usr/sbin/runuser", ["-u", "postgres", "--", bin + "/" + tool] + arguments)
        } else {
            try Self.run(bin + "/" + tool, arguments)
        }
    }

    /// Runs a tool and waits for it with waitpid: Foundation's `Process` would wait for every
    /// descendant to close an inherited descriptor, and the postmaster that pg_ctl starts lives on.
    private static func run(_ path: String, _ arguments: [String]) throws {
        let outPath = testScratchRoot + "/roomcast-pg-out-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: outPath) }
        let out = open(outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard out >= 0 else { throw TestKitError.protocolError("cannot open \(outPath)") }
        // The postmaster pg_ctl starts must not hold any of the test process's sockets.
        let pid: pid_t
        do {
            pid = try spawnClosingInherited(path, arguments, stdout: out)
        } catch {
            close(out)
            throw error
        }
        close(out)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exited = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        guard exited == 0 else {
            let text = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
            throw TestKitError.protocolError("\(path) \(arguments.joined(separator: " ")) failed (\(exited)): \(text)")
        }
    }
}
