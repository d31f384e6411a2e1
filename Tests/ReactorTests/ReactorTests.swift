import Synchronization
import Testing
@testable import Reactor
#if canImport(Glibc)
import Glibc
#endif

/// Runs a loop on its own thread for the duration of `body`.
func withRunningLoop(_ body: (EventLoop) throws -> Void) throws {
    let loop = try EventLoop(name: "test-loop")
    let thread = PosixThread.start(name: "test-loop") { loop.run() }
    defer {
        loop.stop()
        thread.join()
    }
    try body(loop)
}

func waitUntil(_ timeout: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = Instant.now() + .milliseconds(Int64(timeout * 1000))
    while Instant.now() < deadline {
        if condition() { return true }
        usleep(1000)
    }
    return condition()
}

final class Recorder: Sendable {
    let events = Mutex<[String]>([])
    func add(_ s: String) { events.withLock { $0.append(s) } }
    var all: [String] { events.withLock { $0 } }
}

final class ReadCounter: EventHandler {
    let fd: Int32
    let recorder: Recorder
    let name: String
    init(fd: Int32, recorder: Recorder, name: String) {
        self.fd = fd
        self.recorder = recorder
        self.name = name
    }
    override func handleEvent(_ events: UInt32) {
        var buf = [UInt8](repeating: 0, count: 64)
        let n = buf.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, 64) }
        recorder.add("\(name):\(n)")
    }
}

/// A non-Sendable value, the kind `LoopBound` exists for.
final class LoopConfined {
    let n: Int
    init(_ n: Int) { self.n = n }
}

func socketPair() -> (Int32, Int32) {
    var fds: [Int32] = [0, 0]
    _ = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue), 0, &fds)
    return (fds[0], fds[1])
}

/// A socket pair for the output-queue tests (`a` written, `b` read; with `smallBuffers`, 4 KiB
/// kernel buffers so writes come up short) and iovecs for `OutboundQueue.flush`, released after.
func withQueueSockets(smallBuffers: Bool = false, iovecs: Int = 8, _ body: (Int32, Int32, UnsafeMutableBufferPointer<iovec>) throws -> Void) rethrows {
    let (a, b) = socketPair()
    defer { closeDescriptor(a); closeDescriptor(b) }
    if smallBuffers { Socket.setBufferSizes(a, receive: 4096, send: 4096) }
    let iov = UnsafeMutableBufferPointer<iovec>.allocate(capacity: iovecs)
    defer { iov.deallocate() }
    try body(a, b, iov)
}

@Suite("Reactor", .serialized)
struct ReactorTests {
    @Test func executeRunsOnTheLoopInOrder() throws {
        try withRunningLoop { loop in
            let recorder = Recorder()
            for i in 0..<100 {
                loop.execute { recorder.add("\(i):\(loop.inEventLoop)") }
            }
            #expect(waitUntil { recorder.all.count == 100 })
            #expect(recorder.all == (0..<100).map { "\($0):true" })
            #expect(!loop.inEventLoop)
        }
    }

    @Test func timersFireInDeadlineOrderAndCanBeCancelled() throws {
        try withRunningLoop { loop in
            let recorder = Recorder()
            loop.execute {
                loop.schedule(after: .milliseconds(60)) { recorder.add("c") }
                loop.schedule(after: .milliseconds(20)) { recorder.add("a") }
                let cancelled = loop.schedule(after: .milliseconds(30)) { recorder.add("x") }
                loop.schedule(after: .milliseconds(40)) { recorder.add("b") }
                loop.cancel(cancelled)
            }
            #expect(waitUntil { recorder.all.count == 3 })
            usleep(50_000)
            #expect(recorder.all == ["a", "b", "c"])
        }
    }

    @Test func readinessEventsReachTheirHandler() throws {
        try withRunningLoop { loop in
            let recorder = Recorder()
            let (a, b) = socketPair()
            defer { closeDescriptor(a); closeDescriptor(b) }
            loop.execute {
                _ = try? loop.register(fd: a, events: EventLoop.readable, handler: ReadCounter(fd: a, recorder: recorder, name: "a"))
            }
            usleep(20_000)
            _ = Glibc.write(b, "hello", 5)
            #expect(waitUntil { recorder.all == ["a:5"] })
        }
    }

    @Test func staleRegistrationGetsNoEvents() throws {
        // A slot reused after deregistration has a new generation; the old id resolves to nothing.
        let loop = try EventLoop(name: "t")
        let recorder = Recorder()
        let (a, b) = socketPair()
        defer { closeDescriptor(a); closeDescriptor(b) }
        let first = try loop.register(fd: a, events: EventLoop.readable, handler: ReadCounter(fd: a, recorder: recorder, name: "old"))
        loop.deregister(first)
        let second = try loop.register(fd: a, events: EventLoop.readable, handler: ReadCounter(fd: a, recorder: recorder, name: "new"))
        #expect(first.slot == second.slot)
        #expect(first.generation != second.generation)
        #expect(loop.handler(for: first) == nil)
        #expect(loop.handler(for: second) != nil)
        loop.deregister(second)
    }

    @Test func outboundQueueWritesEverythingAcrossPartialWrites() throws {
        try withQueueSockets(smallBuffers: true) { (a, b, iov) throws in
            var queue = OutboundQueue()
            var expected: [UInt8] = []
            for i in 0..<50 {
                let block = ByteBlock.from((0..<(1000 + i * 37)).map { UInt8(truncatingIfNeeded: $0 &+ i) })
                expected += block.array
                queue.append(block)
            }
            #expect(queue.pendingBytes == expected.count)
            var received: [UInt8] = []
            var buf = [UInt8](repeating: 0, count: 65536)
            var sawPending = false
            while !queue.isEmpty || received.count < expected.count {
                if !queue.isEmpty {
                    if try queue.flush(fd: a, iovecs: iov) == .pending { sawPending = true }
                }
                let n = buf.withUnsafeMutableBytes { Glibc.read(b, $0.baseAddress, $0.count) }
                if n > 0 { received += buf[0..<n] }
            }
            #expect(sawPending, "the small socket buffer must force partial writes")
            #expect(received == expected)
            #expect(queue.pendingBytes == 0)
        }
    }

    @Test func droppingUnstartedBlocksKeepsTheStreamWellFramed() throws {
        // A slow consumer's queue: the block mid-write is finished, the rest never start.
        try withQueueSockets(smallBuffers: true) { (a, b, iov) throws in
            var queue = OutboundQueue()
            let first = ByteBlock.from((0..<200_000).map { UInt8(truncatingIfNeeded: $0) })
            queue.append(first)
            queue.append(ByteBlock.from([UInt8](repeating: 0xEE, count: 50_000)))
            queue.append(ByteBlock.from([UInt8](repeating: 0xDD, count: 50_000)))
            #expect(try queue.flush(fd: a, iovecs: iov) == .pending)
            let written = 300_000 - queue.pendingBytes
            #expect(written > 0 && written < first.count)
            #expect(queue.dropUnstarted() == 100_000)
            #expect(queue.pendingBytes == first.count - written)
            var received: [UInt8] = []
            var buf = [UInt8](repeating: 0, count: 65536)
            while received.count < first.count {
                if !queue.isEmpty { _ = try queue.flush(fd: a, iovecs: iov) }
                let n = buf.withUnsafeMutableBytes { Glibc.read(b, $0.baseAddress, $0.count) }
                if n > 0 { received += buf[0..<n] }
            }
            #expect(received == first.array)
            #expect(queue.isEmpty && queue.dropUnstarted() == 0)
        }
    }

    // QS-3: a reader is as far behind as what its socket refused at the last flush; what was
    // queued since (not yet offered to the socket) does not count until a flush refuses it.
    @Test func stalledBytesAreWhatTheLastFlushLeft() throws {
        try withQueueSockets(smallBuffers: true) { (a, b, iov) throws in
            var queue = OutboundQueue()
            // Queued and never offered: nothing stalled.
            for _ in 0..<3 { queue.append(ByteBlock.from([UInt8](repeating: 7, count: 1000))) }
            #expect(queue.heldBytes > 3000 && queue.stalledBytes == 0)
            // Everything taken: still nothing.
            #expect(try queue.flush(fd: a, iovecs: iov) == .drained)
            #expect(queue.stalledBytes == 0)
            // A flush the socket cuts short: the rest is stalled; a block queued after it is not, until
            // the next flush is refused it too.
            queue.append(ByteBlock.from([UInt8](repeating: 8, count: 500_000)))
            #expect(try queue.flush(fd: a, iovecs: iov) == .pending)
            let stalled = queue.stalledBytes
            #expect(stalled == queue.heldBytes && stalled > 0)
            queue.append(ByteBlock.from([UInt8](repeating: 9, count: 1000)))
            #expect(queue.stalledBytes == stalled && queue.heldBytes == stalled + 1000 + OutboundQueue.blockOverhead)
            #expect(try queue.flush(fd: a, iovecs: iov) == .pending)
            #expect(queue.stalledBytes == queue.heldBytes)
            // Dropping what had not started leaves at most what is still queued.
            queue.dropUnstarted()
            #expect(queue.stalledBytes <= queue.heldBytes)
            queue.removeAll()
            #expect(queue.stalledBytes == 0)
            // The count shares a word with the head index: every connection embeds a queue.
            #expect(MemoryLayout<OutboundQueue>.size == 40)
        }
    }

    @Test func heldBytesChargesEachQueuedBlock() throws {
        // A bound counts what the queue keeps alive: 1000 two-byte pongs hold far more than 2000
        // bytes, so each block is charged its bookkeeping too.
        try withQueueSockets { (a, b, iov) throws in
            var queue = OutboundQueue()
            #expect(queue.heldBytes == 0)
            for _ in 0..<1000 { queue.append(ByteBlock.from([0x8A, 0x00])) }
            #expect(queue.pendingBytes == 2000)
            #expect(queue.heldBytes == 2000 + 1000 * OutboundQueue.blockOverhead)
            // Every pong written and 4 bytes of the next block: a partly written block still counts.
            queue.append(ByteBlock.from([UInt8](repeating: 1, count: 10)))
            queue.consume(2 * 1000 + 4)
            #expect(queue.pendingBytes == 6)
            #expect(queue.heldBytes == 6 + OutboundQueue.blockOverhead)
            _ = try queue.flush(fd: a, iovecs: iov)
            #expect(queue.heldBytes == 0)
            // An empty block is never queued, so it is never charged.
            queue.append(ByteBlock.from([UInt8]()))
            #expect(queue.heldBytes == 0)
        }
    }

    // The front block is held inline and the rest in an array: order, partial writes across the
    // two, and drops keep the byte stream exact (consumed byte by byte).
    @Test func frontBlockAndArrayStayInOrderThroughPartialWritesAndDrops() {
        var queue = OutboundQueue()
        queue.append(ByteBlock.from([1, 2, 3]))
        queue.append(ByteBlock.from([4, 5]))
        queue.append(ByteBlock.from([6]))
        #expect(queue.heldBytes == 6 + 3 * OutboundQueue.blockOverhead)
        queue.consume(1)
        queue.consume(2) // the front block is done; the array's first is next
        #expect(queue.heldBytes == 3 + 2 * OutboundQueue.blockOverhead)
        queue.consume(1) // 4 written, 5 not: a started block
        #expect(queue.dropUnstarted() == 1, "only [6] had not started")
        #expect(queue.pendingBytes == 1)
        queue.consume(1)
        #expect(queue.isEmpty && queue.heldBytes == 0)
        // After draining, the next block is the front again, then a started front keeps only itself.
        queue.append(ByteBlock.from([7, 8]))
        queue.append(ByteBlock.from([9]))
        queue.consume(1)
        #expect(queue.dropUnstarted() == 1)
        #expect(queue.pendingBytes == 1 && queue.heldBytes == 1 + OutboundQueue.blockOverhead)
        queue.consume(1)
        // An unstarted front goes with the rest.
        queue.append(ByteBlock.from([1]))
        queue.append(ByteBlock.from([2, 3]))
        #expect(queue.dropUnstarted() == 3)
        #expect(queue.isEmpty && queue.heldBytes == 0)
        queue.append(ByteBlock.from([4]))
        #expect(queue.pendingBytes == 1)
    }

    @Test func frontAndArrayAreWrittenInOrderBySocket() throws {
        try withQueueSockets(iovecs: 2) { (a, b, iov) throws in
            var queue = OutboundQueue()
            var expected: [UInt8] = []
            for i in 0..<5 {
                let block = ByteBlock.from([UInt8](repeating: UInt8(i), count: i + 1))
                expected += block.array
                queue.append(block)
            }
            // Two iovecs a call: the front and one array block, then the array alone.
            #expect(try queue.flush(fd: a, iovecs: iov) == .drained)
            var buf = [UInt8](repeating: 0, count: 64)
            let n = buf.withUnsafeMutableBytes { Glibc.read(b, $0.baseAddress, $0.count) }
            #expect(Array(buf[0..<max(0, n)]) == expected)
        }
    }

    @Test func aHookWithWorkLeftKeepsTheLoopPollingUntilItIsDone() throws {
        // A hook that does a bounded share of its work returns true: the loop polls instead of
        // sleeping and calls it again, with nothing else waking it. Once it returns false the
        // loop sleeps (no more calls until something wakes it).
        final class Calls: Sendable {
            let n = Atomic<Int>(0)
            var value: Int { n.load(ordering: .relaxed) }
        }
        let calls = Calls()
        try withRunningLoop { loop in
            loop.execute {
                loop.addBeforeSleepHook { calls.n.add(1, ordering: .relaxed).newValue < 5 }
            }
            #expect(waitUntil { calls.value >= 5 })
            usleep(100_000)
            #expect(calls.value == 5, "the loop kept calling a hook that had no work left")
            loop.execute {}
            #expect(waitUntil { calls.value == 6 })
        }
    }

    @Test func syscallWrapperMapsErrno() throws {
        // EAGAIN is "would block"; other errors name the call.
        let (a, b) = socketPair()
        defer { closeDescriptor(a); closeDescriptor(b) }
        var buf = [UInt8](repeating: 0, count: 8)
        let r = try buf.withUnsafeMutableBytes { try Socket.read(a, into: $0) }
        #expect(r == .wouldBlock)
        do {
            _ = try buf.withUnsafeMutableBytes { try Socket.read(-1, into: $0) }
            Issue.record("expected EBADF")
        } catch let error as SyscallError {
            #expect(error.errno == EBADF)
            #expect(error.call == "read")
        }
    }

    @Test func signalsDuringTheWaitAreRetried() throws {
        // A handler is installed so the signal interrupts epoll_wait (EINTR) instead of killing us.
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in }
        sigemptyset(&action.sa_mask)
        var previous = sigaction()
        sigaction(SIGUSR2, &action, &previous)
        defer { sigaction(SIGUSR2, &previous, nil) }
        try withRunningLoop { loop in
            let loopThread = Mutex<pthread_t?>(nil)
            loop.execute { loopThread.withLock { $0 = pthread_self() } }
            #expect(waitUntil { loopThread.withLock { $0 } != nil })
            guard let thread = loopThread.withLock({ $0 }) else { return }
            for _ in 0..<5 {
                usleep(10_000) // back asleep in epoll_wait
                pthread_kill(thread, SIGUSR2)
            }
            let recorder = Recorder()
            loop.execute { recorder.add("still running") }
            #expect(waitUntil { recorder.all == ["still running"] })
        }
    }

    @Test func epollWaitFailureStopsTheProcess() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            // Were the error ignored, the loop would spin forever: the alarm ends that, and the
            // message check below fails.
            alarm(10)
            let loop = try EventLoop(name: "broken")
            closeDescriptor(loop.epfd)
            loop.run()
        }
        let stderr = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(stderr.contains("epoll_wait failed: \(String(cString: strerror(EBADF))) (errno \(EBADF))"))
    }

    @Test func loopBoundValueIsReadableOnItsLoop() throws {
        try withRunningLoop { loop in
            let bound = LoopBound(LoopConfined(7), loop: loop)
            let seen = Mutex<Int?>(nil)
            loop.execute { seen.withLock { $0 = bound.value.n } }
            #expect(waitUntil { seen.withLock { $0 } == 7 })
        }
    }

    @Test func loopBoundValueOffItsLoopStopsTheProcess() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let loop = try EventLoop(name: "elsewhere")
            let bound = LoopBound(LoopConfined(1), loop: loop)
            _ = bound.value.n // not on the loop's thread (the loop is not even running)
        }
        let stderr = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(stderr.contains("LoopBound value used off its loop"))
    }

    @Test func instantArithmetic() {
        let t = Instant(nanoseconds: 5_000_000_000)
        #expect((t + .milliseconds(1500)).nanoseconds == 6_500_000_000)
        #expect((t + .seconds(2)) - t == .seconds(2))
    }
}
