import CShims
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Something registered with an event loop for readiness events: a subclass overrides
/// `handleEvent`. A class rather than a protocol so the loop's registration table holds one word
/// per handler, not an existential's two (8 bytes less for every connection).
open class EventHandler {
    public init() {}

    /// Called on the loop thread with the epoll event mask (`EventLoop.readable`, ...).
    open func handleEvent(_ events: UInt32) {
        preconditionFailure("\(type(of: self)) must override handleEvent")
    }
}

/// Identity of a registration. A slot is reused after deregistration, but with a new generation,
/// so an event queued for the old registration is never delivered to the new one (even when the
/// kernel reuses the same fd number).
public struct RegistrationID: Hashable, Sendable {
    public let slot: UInt32
    public let generation: UInt32
    var packed: UInt64 { UInt64(generation) << 32 | UInt64(slot) }
    init(slot: UInt32, generation: UInt32) {
        self.slot = slot
        self.generation = generation
    }
    init(packed: UInt64) {
        self.slot = UInt32(truncatingIfNeeded: packed)
        self.generation = UInt32(truncatingIfNeeded: packed >> 32)
    }
}

public struct TimerID: Hashable, Sendable {
    let raw: UInt64
}

/// A monotonic instant in nanoseconds.
public struct Instant: Comparable, Hashable, Sendable {
    public var nanoseconds: UInt64
    public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }
    public static func < (a: Instant, b: Instant) -> Bool { a.nanoseconds < b.nanoseconds }
    public static func + (a: Instant, d: Duration) -> Instant {
        let (s, atto) = d.components
        let ns = Int64(s) * 1_000_000_000 + atto / 1_000_000_000
        return Instant(nanoseconds: ns >= 0 ? a.nanoseconds &+ UInt64(ns) : a.nanoseconds &- UInt64(-ns))
    }
    public static func - (a: Instant, b: Instant) -> Duration {
        .nanoseconds(Int64(bitPattern: a.nanoseconds &- b.nanoseconds))
    }
    /// The current monotonic time (CLOCK_MONOTONIC). Only the shells call this; state machines are
    /// given the time.
    public static func now() -> Instant {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Instant(nanoseconds: UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec))
    }
}

/// Wall-clock milliseconds since 1970 (CLOCK_REALTIME), for shells that stamp events.
public func wallClockMilliseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}

/// One epoll loop on one thread: readiness events, cross-thread tasks woken by an eventfd, timers
/// armed on a timerfd, and hooks that run before it sleeps (where connections flush their writes).
///
/// Shaped after Redis `ae.c`: epoll_wait → handle events → run due timers → flush → sleep.
public final class EventLoop: @unchecked Sendable {
    // Safety: what other threads use is thread-safe: `inbox` is a Mutex; `wakePending`,
    // `threadID` and `stopRequested` are atomics (`execute`, `wake`, `stop` and `inEventLoop` are
    // the calls for any thread); `name`, `epfd`, `wakeFD`, `timerFD`, `readBuffer` and `iovecs`
    // are immutable after `init`. The rest (`slots`, `freeSlots`, `timerHeap`, `timerActions`,
    // `nextTimerID`, `armedDeadline`, `beforeSleepHooks`, `now`, and the memory behind
    // `readBuffer`/`iovecs`) is used only by the thread that runs the loop: registrations, timers
    // and hooks are documented "loop thread only". Before `run()` starts, the loop's owner may set
    // them up from its own thread; starting the loop's thread orders those writes before the
    // loop's reads. The rule is not checked at run time.
    public static let readable = UInt32(EPOLLIN.rawValue)
    public static let writable = UInt32(EPOLLOUT.rawValue)
    public static let hangup = UInt32(EPOLLHUP.rawValue) | UInt32(EPOLLRDHUP.rawValue)
    public static let error = UInt32(EPOLLERR.rawValue)
    /// Edge-triggered: report a readiness change once, not for as long as it lasts.
    public static let edgeTriggered = UInt32(EPOLLET.rawValue)

    private static let wakeToken: UInt64 = .max
    private static let timerToken: UInt64 = .max - 1

    public let name: String
    let epfd: Int32 // internal: a test breaks it to check that epoll_wait failures are fatal
    private let wakeFD: Int32
    private let timerFD: Int32

    private struct Slot {
        var handler: EventHandler?
        var fd: Int32
        var generation: UInt32
    }
    @exclusivity(unchecked) private var slots: [Slot] = []
    private var freeSlots: [UInt32] = []

    private struct TimerEntry: Comparable {
        var deadline: Instant
        var id: UInt64
        static func < (a: TimerEntry, b: TimerEntry) -> Bool {
            a.deadline == b.deadline ? a.id < b.id : a.deadline < b.deadline
        }
    }
    private var timerHeap = BinaryHeap<TimerEntry>()
    private var timerActions: [UInt64: () -> Void] = [:]
    private var nextTimerID: UInt64 = 1
    private var armedDeadline: Instant?

    private var beforeSleepHooks: [() -> Bool] = []
    /// The time when the loop last woke up: what connection timers compare against. Read on the
    /// loop thread; refreshed once per iteration instead of once per use. Written only by `run`
    /// between events and read by the handlers it calls, on the same thread, never while it is
    /// being written: no dynamic exclusivity check (it cost one per read, twice per request). (A
    /// getter over private storage: other modules' direct reads of a stored property check anyway.)
    public var now: Instant { nowStorage }
    @exclusivity(unchecked) private var nowStorage = Instant.now()
    private let inbox = Mutex<[@Sendable () -> Void]>([])
    private let wakePending = Atomic<Bool>(false)
    private let threadID = Atomic<UInt>(0)
    private let stopRequested = Atomic<Bool>(false)

    /// Per-loop scratch memory, reused by every connection of the loop.
    public let readBuffer: UnsafeMutableRawBufferPointer
    public let iovecs: UnsafeMutableBufferPointer<iovec>

    public init(name: String, readBufferSize: Int = 256 * 1024) throws {
        self.name = name
        epfd = try syscallChecked("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) }
        wakeFD = try syscallChecked("eventfd") { eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC)) }
        timerFD = try syscallChecked("timerfd_create") {
            timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK | TFD_CLOEXEC))
        }
        readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: readBufferSize, alignment: 16)
        iovecs = UnsafeMutableBufferPointer<iovec>.allocate(capacity: 256)
        try addRaw(fd: wakeFD, token: Self.wakeToken, events: Self.readable)
        try addRaw(fd: timerFD, token: Self.timerToken, events: Self.readable)
    }

    deinit {
        closeDescriptor(epfd)
        closeDescriptor(wakeFD)
        closeDescriptor(timerFD)
        readBuffer.deallocate()
        iovecs.deallocate()
    }

    private func addRaw(fd: Int32, token: UInt64, events: UInt32) throws(SyscallError) {
        var ev = epoll_event()
        ev.events = events
        ev.data.u64 = token
        try syscallChecked("epoll_ctl(ADD)") { epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) }
    }

    /// True on the loop's own thread.
    public var inEventLoop: Bool {
        let id = threadID.load(ordering: .acquiring)
        return id != 0 && pthread_equal(pthread_t(id), pthread_self()) != 0
    }

    // MARK: Registrations (loop thread only)

    public func register(fd: Int32, events: UInt32, handler: EventHandler) throws(SyscallError) -> RegistrationID {
        let slot: UInt32
        if let free = freeSlots.popLast() {
            slot = free
            slots[Int(slot)].handler = handler
            slots[Int(slot)].fd = fd
        } else {
            slot = UInt32(slots.count)
            slots.append(Slot(handler: handler, fd: fd, generation: 1))
        }
        let id = RegistrationID(slot: slot, generation: slots[Int(slot)].generation)
        do {
            try addRaw(fd: fd, token: id.packed, events: events)
        } catch {
            release(slot)
            throw error
        }
        return id
    }

    public func modify(_ id: RegistrationID, events: UInt32) {
        guard let fd = fdFor(id) else { return }
        var ev = epoll_event()
        ev.events = events
        ev.data.u64 = id.packed
        _ = epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev)
    }

    /// Removes the registration; stale events for it are dropped. The caller closes the fd.
    public func deregister(_ id: RegistrationID) {
        guard let fd = fdFor(id) else { return }
        _ = epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nil)
        release(id.slot)
    }

    private func release(_ slot: UInt32) {
        slots[Int(slot)].handler = nil
        slots[Int(slot)].fd = -1
        slots[Int(slot)].generation &+= 1
        freeSlots.append(slot)
    }

    private func fdFor(_ id: RegistrationID) -> Int32? {
        guard Int(id.slot) < slots.count else { return nil }
        let s = slots[Int(id.slot)]
        guard s.generation == id.generation, s.handler != nil else { return nil }
        return s.fd
    }

    /// The handler of a live registration, or nil if it has gone.
    public func handler(for id: RegistrationID) -> EventHandler? {
        guard Int(id.slot) < slots.count else { return nil }
        let s = slots[Int(id.slot)]
        return s.generation == id.generation ? s.handler : nil
    }

    // MARK: Timers (loop thread only)

    @discardableResult
    public func schedule(at deadline: Instant, _ action: @escaping () -> Void) -> TimerID {
        let id = nextTimerID
        nextTimerID += 1
        timerActions[id] = action
        timerHeap.push(TimerEntry(deadline: deadline, id: id))
        rearmTimer()
        return TimerID(raw: id)
    }

    @discardableResult
    public func schedule(after delay: Duration, _ action: @escaping () -> Void) -> TimerID {
        schedule(at: Instant.now() + delay, action)
    }

    /// Runs `action` every `interval` until the loop stops.
    public func scheduleRepeating(every interval: Duration, _ action: @escaping () -> Void) {
        func again() {
            action()
            schedule(after: interval, again)
        }
        schedule(after: interval, again)
    }

    public func cancel(_ timer: TimerID) {
        timerActions[timer.raw] = nil
    }

    private func rearmTimer() {
        while let top = timerHeap.top, timerActions[top.id] == nil { _ = timerHeap.pop() }
        let next = timerHeap.top?.deadline
        guard next != armedDeadline else { return }
        armedDeadline = next
        var spec = itimerspec()
        if let next {
            // timerfd with TFD_TIMER_ABSTIME needs a non-zero value; clamp to 1 ns.
            let ns = max(next.nanoseconds, 1)
            spec.it_value = timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))
        }
        _ = timerfd_settime(timerFD, Int32(TFD_TIMER_ABSTIME), &spec, nil)
    }

    private func runDueTimers() {
        var expirations: UInt64 = 0
        _ = Glibc.read(timerFD, &expirations, 8)
        armedDeadline = nil
        let now = Instant.now()
        while let top = timerHeap.top, top.deadline <= now {
            _ = timerHeap.pop()
            if let action = timerActions.removeValue(forKey: top.id) { action() }
        }
        rearmTimer()
    }

    // MARK: Hooks and cross-thread tasks

    /// Runs `hook` on every iteration before the loop waits (loop thread only). A hook that returns
    /// true has work left (it did a bounded share of it): the loop then only polls for events,
    /// without sleeping, and calls the hook again on its next iteration.
    public func addBeforeSleepHook(_ hook: @escaping () -> Bool) {
        beforeSleepHooks.append(hook)
    }

    /// Runs `task` on the loop thread soon. Callable from any thread.
    public func execute(_ task: @escaping @Sendable () -> Void) {
        inbox.withLock { $0.append(task) }
        wake()
    }

    /// Wakes the loop from epoll_wait. Callable from any thread; coalesces repeated wake-ups.
    public func wake() {
        if wakePending.exchange(true, ordering: .acquiringAndReleasing) { return }
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }

    private func drainInbox() {
        var value: UInt64 = 0
        _ = Glibc.read(wakeFD, &value, 8)
        wakePending.store(false, ordering: .releasing)
        let tasks = inbox.withLock { tasks -> [@Sendable () -> Void] in
            let taken = tasks
            tasks.removeAll(keepingCapacity: true)
            return taken
        }
        for task in tasks { task() }
    }

    // MARK: Running

    /// Runs the loop on the calling thread until `stop()`.
    public func run() {
        threadID.store(UInt(pthread_self()), ordering: .releasing)
        let capacity: Int32 = 512
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: Int(capacity))
        defer { events.deallocate() }
        while !stopRequested.load(ordering: .acquiring) {
            var more = false
            for hook in beforeSleepHooks where hook() { more = true }
            let n: Int32
            do {
                // A signal interrupting the wait (EINTR) is retried by the wrapper. Any other error
                // means the loop's epoll instance is unusable, and the loop cannot go on.
                n = try syscallChecked("epoll_wait") { epoll_wait(epfd, events, capacity, more ? 0 : -1) }
            } catch {
                fatalError("\(error)")
            }
            nowStorage = Instant.now()
            for i in 0..<Int(n) {
                let ev = events[i]
                let token = ev.data.u64
                switch token {
                case Self.wakeToken: drainInbox()
                case Self.timerToken: runDueTimers()
                default:
                    let id = RegistrationID(packed: token)
                    guard Int(id.slot) < slots.count else { continue }
                    let slot = slots[Int(id.slot)]
                    guard slot.generation == id.generation, let handler = slot.handler else { continue }
                    handler.handleEvent(ev.events)
                }
            }
        }
        // Run what was queued before the stop so nothing posted is silently lost.
        drainInbox()
        for hook in beforeSleepHooks { while hook() {} }
    }

    /// Asks the loop to return from `run()` after its current iteration. Callable from any thread.
    public func stop() {
        stopRequested.store(true, ordering: .releasing)
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }
}

/// A value confined to one event loop, carried across threads only to be used back on that loop.
/// (NIO's `NIOLoopBound`.) Using it off its loop stops the process, in release builds too.
public struct LoopBound<Value>: @unchecked Sendable {
    // Safety: `_value` is only read through `value`, which checks (in every build) that it runs on
    // `loop`'s thread; `loop` is Sendable and both fields are immutable.
    public let loop: EventLoop
    private let _value: Value
    public init(_ value: Value, loop: EventLoop) {
        self.loop = loop
        self._value = value
    }
    public var value: Value {
        precondition(loop.inEventLoop, "LoopBound value used off its loop")
        return _value
    }
}
