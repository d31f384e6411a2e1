import CShims
#if canImport(Glibc)
import Glibc
#endif

/// A joinable POSIX thread running a Sendable closure.
///
/// Threads are started from this nonisolated function, never from top-level code (SWIFT-NOTES §1:
/// a closure written in `main.swift` is inferred `@MainActor` and traps off the main thread).
public struct PosixThread: @unchecked Sendable {
    // Safety: pthread_t is a plain integer handle; join is called at most once by the owner.
    private let handle: pthread_t

    private final class Box {
        let body: @Sendable () -> Void
        let name: String
        init(_ body: @escaping @Sendable () -> Void, name: String) {
            self.body = body
            self.name = name
        }
    }

    public static func start(name: String, _ body: @escaping @Sendable () -> Void) -> PosixThread {
        let box = Unmanaged.passRetained(Box(body, name: name)).toOpaque()
        var handle = pthread_t()
        let rc = pthread_create(&handle, nil, { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            _ = cshims_set_thread_name(String(box.name.prefix(15)))
            box.body()
            return nil
        }, box)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        return PosixThread(handle: handle)
    }

    public func join() {
        _ = pthread_join(handle, nil)
    }
}

/// Blocks the given signals in the calling thread (and in threads it starts afterwards), so that
/// one thread can receive them with `waitForSignal`.
public func blockSignals(_ signals: [Int32]) {
    var set = sigset_t()
    sigemptyset(&set)
    for s in signals { sigaddset(&set, s) }
    pthread_sigmask(SIG_BLOCK, &set, nil)
}

/// Waits for one of the (blocked) signals and returns it.
public func waitForSignal(_ signals: [Int32]) -> Int32 {
    var set = sigset_t()
    sigemptyset(&set)
    for s in signals { sigaddset(&set, s) }
    var received: Int32 = 0
    sigwait(&set, &received)
    return received
}

public func ignoreSIGPIPE() {
    signal(SIGPIPE, SIG_IGN)
}
