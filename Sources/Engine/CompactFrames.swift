import Reactor
import WebSocket
import Wire

extension Frames {
    /// TR-5: the compact form of a block of server text frames (one event, or a batch's events
    /// merged by the hub): each event frame's payload transcoded (`CompactEncoding`), any other
    /// frame copied. The block itself when nothing in it changes. Pure.
    public static func compact(_ block: ByteBlock) -> ByteBlock {
        let all = block.bytes
        var pieces: [[UInt8]] = []
        var changed = false
        let whole = forEach(in: block) { opcode, frame, payload in
            if opcode == WebSocketOpcode.text.rawValue, let compact = CompactEncoding.transcode(UnsafeRawBufferPointer(rebasing: all[payload])) {
                pieces.append(frameBytes(compact))
                changed = true
            } else {
                pieces.append(Array(all[frame]))
            }
        }
        guard whole, changed else { return block }
        return ByteBlock.from(pieces.count == 1 ? pieces[0] : Array(pieces.joined()))
    }

    /// Calls `body` with each server frame of `block` (one, or a batch's merged by the hub): its
    /// opcode, its bytes and its payload's, as ranges of `block.bytes`. False when the block does
    /// not end on a frame boundary (then the frames before the cut were given). Pure.
    @discardableResult
    public static func forEach(in block: ByteBlock, _ body: (_ opcode: UInt8, _ frame: Range<Int>, _ payload: Range<Int>) -> Void) -> Bool {
        let all = block.bytes
        var at = 0
        while at < all.count {
            // Server frames are unmasked: 2, 4 or 10 header bytes.
            guard all.count - at >= 2 else { return false }
            let opcode = all[at] & 0x0F
            let length7 = Int(all[at + 1] & 0x7F)
            var header = 2
            var length = length7
            if length7 == 126 {
                guard all.count - at >= 4 else { return false }
                length = Int(all[at + 2]) << 8 | Int(all[at + 3])
                header = 4
            } else if length7 == 127 {
                guard all.count - at >= 10 else { return false }
                length = (0..<8).reduce(0) { $0 << 8 | Int(all[at + 2 + $1]) }
                header = 10
            }
            guard all.count - at - header >= length else { return false }
            body(opcode, at..<(at + header + length), (at + header)..<(at + header + length))
            at += header + length
        }
        return true
    }

    static func frameBytes(_ payload: [UInt8]) -> [UInt8] {
        text(payload).array
    }
}

/// TR-5: the compact form of the last block a loop transcoded, so the event a room's compact
/// members share is transcoded once per loop, and only when a compact member receives it (no
/// cost in a room without one). Confined to its loop.
public struct CompactFrameCache {
    private var source: ByteBlock?
    private var compact: ByteBlock?
    /// How many blocks were transcoded (tests check the once-per-event promise).
    public private(set) var transcoded = 0

    public init() {}

    public mutating func frame(for block: ByteBlock) -> ByteBlock {
        if let source, let compact, source.base == block.base, source.count == block.count { return compact }
        let c = Frames.compact(block)
        // The cache holds the source, so its address cannot be reused by another block meanwhile.
        source = block
        compact = c
        transcoded += 1
        return c
    }
}
