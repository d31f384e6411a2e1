#if canImport(Glibc)
import Glibc
#endif
import Logging

/// The one place that stops the process when it cannot go on safely: a replica it cannot rebuild
/// here, a log it cannot follow (an entry skipped or unreadable, a failover that lost entries), or
/// a cluster that declared this node run dead. It logs one critical line that says why and exits
/// with `exitCode`, so a supervisor (systemd, the container runtime) starts it again, and the new
/// run rebuilds its state (from disk, or from the cluster's log).
public struct Halt: Sendable {
    /// EX_TEMPFAIL: try again; the next start recovers by itself.
    public static let exitCode: Int32 = 75
    private let logger: Logger
    private let exit: @Sendable (Int32) -> Never

    /// `exit`: the process's (tests inject one that does not return to them either).
    public init(logger: Logger, exit: @escaping @Sendable (Int32) -> Never = { Glibc.exit($0) }) {
        self.logger = logger
        self.exit = exit
    }

    public func callAsFunction(_ why: String, metadata: Logger.Metadata = [:]) -> Never {
        logger.critical("stopping: \(why)", metadata: metadata.merging(["exit": "\(Self.exitCode)"]) { a, _ in a })
        exit(Self.exitCode)
    }
}
