#if canImport(Glibc)
import Glibc
#endif

/// An immutable run of bytes on the heap, shareable by many connections and threads.
///
/// Fan-out encodes an event once into a `ByteBlock` and queues the same block on every recipient
/// connection (ARCHITECTURE §3–4), so the bytes are written by reference, never copied per
/// connection. The bytes live in the object itself (one allocation); their address is stable
/// for the life of the object, which `writev` needs.
public struct ByteBlock: @unchecked Sendable {
    // Safe to share: the bytes are written only by `make` before the block is returned (and so
    // before any other thread can see it), and are read-only afterwards; `storage` is immutable.
    final class Storage: ManagedBuffer<Int, UInt8> {}
    let storage: Storage

    /// Allocates `count` bytes and lets `initialize` fill them before the block is published.
    public static func make(count: Int, initialize: (UnsafeMutableRawBufferPointer) -> Void) -> ByteBlock {
        let buffer = Storage.create(minimumCapacity: max(count, 1)) { _ in count }
        let storage = unsafeDowncast(buffer, to: Storage.self)
        storage.withUnsafeMutablePointerToElements { initialize(UnsafeMutableRawBufferPointer(start: $0, count: count)) }
        return ByteBlock(storage: storage)
    }

    public static func copying(_ bytes: UnsafeRawBufferPointer) -> ByteBlock {
        make(count: bytes.count) { dst in
            if let src = bytes.baseAddress, bytes.count > 0 { dst.baseAddress!.copyMemory(from: src, byteCount: bytes.count) }
        }
    }

    public static func from<C: Collection>(_ bytes: C) -> ByteBlock where C.Element == UInt8 {
        if let block = bytes.withContiguousStorageIfAvailable({ copying(UnsafeRawBufferPointer($0)) }) { return block }
        return make(count: bytes.count) { dst in _ = dst.initializeMemory(as: UInt8.self, from: bytes) }
    }

    /// One block holding `blocks` back to back.
    public static func concatenating(_ blocks: [ByteBlock]) -> ByteBlock {
        make(count: blocks.reduce(0) { $0 + $1.count }) { dst in
            var at = 0
            for b in blocks {
                (dst.baseAddress! + at).copyMemory(from: b.base, byteCount: b.count)
                at += b.count
            }
        }
    }

    /// Read through the header's pointer: `ManagedBuffer.header` is a class's stored `var`, and
    /// reading it as a property costs a dynamic exclusivity check on every call (several per
    /// written response). The header is written once, in `make`, before the block is shared.
    public var count: Int { storage.withUnsafeMutablePointerToHeader { $0.pointee } }

    /// The first byte. Stable while the block is alive (the elements are inside the object).
    public var base: UnsafeMutableRawPointer {
        storage.withUnsafeMutablePointerToElements { UnsafeMutableRawPointer($0) }
    }

    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    public var array: [UInt8] { Array(bytes) }
}
