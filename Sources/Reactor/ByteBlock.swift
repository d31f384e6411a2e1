#if canImport(Glibc)
import Glibc
#endif

/// An immutable run of bytes on the heap, shareable by many connections and threads.
///
/// Fan-out encodes an event once into a `ByteBlock` and queues the same block on every recipient
/// connection (ARCHITECTURE §3–4), so the bytes are written by reference, never copied per
/// connection. The storage address is stable for the life of the object, which `writev` needs.
public final class ByteBlock: @unchecked Sendable {
    // Safe to share: the bytes are written only inside `init` (before any other thread can see the
    // block) and are read-only afterwards; `base` and `count` are immutable.
    public let base: UnsafeMutableRawPointer
    public let count: Int

    /// Allocates `count` bytes and lets `initialize` fill them before the block is published.
    public init(count: Int, initialize: (UnsafeMutableRawBufferPointer) -> Void) {
        self.count = count
        self.base = UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 16)
        initialize(UnsafeMutableRawBufferPointer(start: base, count: count))
    }

    public convenience init(copying bytes: UnsafeRawBufferPointer) {
        self.init(count: bytes.count) { dst in
            if let src = bytes.baseAddress, bytes.count > 0 { dst.baseAddress!.copyMemory(from: src, byteCount: bytes.count) }
        }
    }

    public convenience init<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        self.init(count: bytes.count) { dst in
            _ = dst.initializeMemory(as: UInt8.self, from: bytes)
        }
    }

    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    public var array: [UInt8] { Array(bytes) }

    deinit { base.deallocate() }
}
