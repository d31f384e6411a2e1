#if canImport(Glibc)
import Glibc
#endif

/// A connection's pending output: shared `ByteBlock`s written with one `writev` per flush.
///
/// The queue only counts; the bound (and what happens past it: input paused, a slow-consumer
/// close) is the owner's policy, checked against `heldBytes`.
public struct OutboundQueue {
    /// What a bound charges each queued block beyond its bytes: the block's object header and the
    /// allocator's rounding (about 40 bytes for a small block) and its slot in the queue. Without it a
    /// flood of tiny frames (2-byte pongs) would hold many times the bytes counted.
    public static let blockOverhead = 64

    /// The queue's front block, held inline: a connection sent one frame at a time (nearly every
    /// idle or paced one) never allocates the array, and an idle connection holds none.
    private var front: ByteBlock?
    /// The blocks after `front`, from `head`.
    private var blocks: [ByteBlock] = []
    // 32 bits each, so `stalled` costs the queue no room.
    private var head32: Int32 = 0
    private var head: Int {
        get { Int(head32) }
        set { head32 = Int32(truncatingIfNeeded: newValue) }
    }
    /// `heldBytes` when the last flush ended: what the socket did not take.
    private var stalled: Int32 = 0
    /// Bytes of the front block (`front`, or `blocks[head]` when there is none) already written.
    private var headOffset = 0
    public private(set) var pendingBytes = 0

    public init() {}

    public var isEmpty: Bool { pendingBytes == 0 }

    /// Memory this queue keeps alive, as a bound counts it: the unwritten bytes plus
    /// `blockOverhead` for each block not completely written.
    public var heldBytes: Int { pendingBytes + ((front == nil ? 0 : 1) + blocks.count - head) * Self.blockOverhead }

    /// What the socket did not take at the last flush (as `heldBytes` counts it): how far behind
    /// the reader is. Blocks queued since, not yet offered to the socket, are not in it.
    public var stalledBytes: Int { min(Int(stalled), heldBytes) }

    public mutating func append(_ block: ByteBlock) {
        guard block.count > 0 else { return }
        if pendingBytes == 0 {
            front = block
        } else {
            blocks.append(block)
        }
        pendingBytes += block.count
    }

    public enum FlushResult: Equatable {
        /// Everything was written.
        case drained
        /// The socket's buffer is full; wait for writability.
        case pending
    }

    /// Writes as much as the socket takes with `writev`, `iovecs.count` blocks at a time.
    public mutating func flush(fd: Int32, iovecs: UnsafeMutableBufferPointer<iovec>) throws(SyscallError) -> FlushResult {
        defer { stalled = Int32(clamping: heldBytes) }
        while pendingBytes > 0 {
            var n = 0
            var skip = headOffset
            if let front {
                iovecs[0] = iovec(iov_base: front.base + skip, iov_len: front.count - skip)
                n = 1
                skip = 0
            }
            var i = head
            while i < blocks.count && n < iovecs.count {
                let block = blocks[i]
                iovecs[n] = iovec(iov_base: block.base + skip, iov_len: block.count - skip)
                skip = 0
                n += 1
                i += 1
            }
            switch try Socket.writev(fd, iovecs.baseAddress!, count: Int32(n)) {
            case .wouldBlock:
                return .pending
            case .processed(let written):
                consume(written)
                if written == 0 { return .pending }
            }
        }
        return .drained
    }

    /// Drops `count` written bytes from the front.
    mutating func consume(_ count: Int) {
        var left = count
        pendingBytes -= count
        if left > 0, let f = front {
            let remaining = f.count - headOffset
            if left >= remaining {
                left -= remaining
                front = nil
                headOffset = 0
            } else {
                headOffset += left
                left = 0
            }
        }
        while left > 0 {
            let remaining = blocks[head].count - headOffset
            if left >= remaining {
                left -= remaining
                head += 1
                headOffset = 0
            } else {
                headOffset += left
                left = 0
            }
        }
        if head == blocks.count {
            // A burst's array goes with it: a drained queue holds no storage, so an idle
            // connection keeps none (one allocation per burst, not per frame).
            if !blocks.isEmpty { blocks = [] }
            head = 0
        } else if head > 32 && head * 2 > blocks.count {
            blocks.removeFirst(head)
            head = 0
        }
    }

    /// Drops every block not yet started, keeping a partly written one (so the byte stream stays
    /// well-framed). Returns the bytes dropped.
    @discardableResult
    public mutating func dropUnstarted() -> Int {
        var dropped = 0
        if let f = front {
            if headOffset == 0 {
                dropped += f.count
                front = nil
            }
            // A started front block is kept, and everything behind it is dropped.
            dropped += blocks[head...].reduce(0) { $0 + $1.count }
            blocks = []
            head = 0
        } else if head < blocks.count {
            let keep = headOffset > 0 ? 1 : 0
            dropped = blocks[(head + keep)...].reduce(0) { $0 + $1.count }
            blocks.removeSubrange((head + keep)...)
            if blocks.count == head {
                blocks = []
                head = 0
            }
        }
        pendingBytes -= dropped
        if pendingBytes == 0 { headOffset = 0 }
        stalled = min(stalled, Int32(clamping: heldBytes))
        return dropped
    }

    /// Forgets everything (the connection is closing).
    public mutating func removeAll() {
        front = nil
        blocks = []
        head = 0
        headOffset = 0
        pendingBytes = 0
        stalled = 0
    }
}
