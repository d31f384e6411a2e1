import Foundation

/// Runs each job on a thread of its own. Swift Testing runs tests on the shared cooperative pool,
/// which has one thread per core; tests that block on sockets, processes or timers held it, so
/// on a 2-core machine everything else waited behind them.
public final class ThreadPerJobExecutor: TaskExecutor, @unchecked Sendable {
    // Safety: no stored state; each job runs once on the thread made for it.
    public static let shared = ThreadPerJobExecutor()

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        let thread = Thread { unowned.runSynchronously(on: executor) }
        thread.stackSize = 1 << 23
        thread.start()
    }
}

/// Runs blocking test code (sockets, child processes, real timers) off the shared pool. The task
/// is the same, so expectations inside are recorded against the running test.
public func offPool<T>(_ body: () throws -> T) async throws -> T {
    try await withTaskExecutorPreference(ThreadPerJobExecutor.shared) { try body() }
}
