import Chat
import Reactor
import Synchronization
import WebSocket
import Wire

extension Frames {
    /// TR-5: the compact form of a block of server text frames (one event, or a batch's events
    /// merged by the hub): each event frame's payload transcoded (`CompactEncoding`), any other
    /// frame copied. The block itself when nothing in it changes. Pure.
    /// With `alias`, events of that room carry its alias instead of its id (`CompactEncoding`).
    public static func compact(_ block: ByteBlock, alias: CompactEncoding.RoomAlias? = nil) -> ByteBlock {
        let all = block.bytes
        var pieces: [[UInt8]] = []
        var changed = false
        let whole = forEach(in: block) { opcode, frame, payload in
            if opcode == WebSocketOpcode.text.rawValue, let compact = CompactEncoding.transcode(UnsafeRawBufferPointer(rebasing: all[payload]), alias: alias) {
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

/// TR-5: the compact forms of the last block a loop transcoded, so the event a room's compact
/// members share is transcoded once per loop and form, and only when a compact member receives
/// it (no cost in a room without one). Two forms: with the room's alias (for WebSocket
/// connections that were told it) and without (the room id: HTTP streams, and connections not
/// yet told the alias), each with its own slot so members of both kinds in one room do not
/// transcode the block again in turn. Confined to its loop.
public struct CompactFrameCache {
    private struct Slot {
        let source: ByteBlock
        let compact: ByteBlock
        let alias: Int32
    }
    private var plain: Slot?
    private var aliased: Slot?
    /// How many times a block was transcoded (tests check the once-per-event-per-form promise).
    public private(set) var transcoded = 0

    public init() {}

    /// `block` compact, the room id in its events replaced by `alias` when given.
    public mutating func frame(for block: ByteBlock, alias: CompactEncoding.RoomAlias? = nil) -> ByteBlock {
        if let alias {
            if let a = aliased, a.source.base == block.base, a.source.count == block.count, a.alias == alias.number { return a.compact }
            let c = Frames.compact(block, alias: alias)
            // The slot holds the source, so its address cannot be reused by another block meanwhile.
            aliased = Slot(source: block, compact: c, alias: alias.number)
            transcoded += 1
            return c
        }
        if let p = plain, p.source.base == block.base, p.source.count == block.count { return p.compact }
        let c = Frames.compact(block)
        plain = Slot(source: block, compact: c, alias: 0)
        transcoded += 1
        return c
    }
}

/// TR-5: the node's room aliases: a small number for each (app, room) key a compact WebSocket
/// connection joined, switched to or observed, told in that answer and written in the room's
/// compact events instead of its id. One table for every I/O loop of the node, so a room's
/// event is transcoded once per loop for all its members. Numbers start at 1, are given in
/// order, and are never taken back nor reused while the node runs: an alias a connection was told
/// means the same room for as long as the connection lives (a connection to another node, or
/// after a restart, is told that node's). At most `Limits.maxRoomAliases`; past that, rooms
/// without one keep their ids. Keys are (app, room): two apps' rooms of the same id get
/// different numbers.
public final class RoomAliases: Sendable {
    private struct State {
        var byRoom: [RoomKey: CompactEncoding.RoomAlias] = [:]
        var next: Int32 = 1
    }
    private let state = Mutex(State())
    private let bound: Int

    public init(bound: Int = Limits.maxRoomAliases) {
        self.bound = bound
    }

    /// The room's alias, given now if it has none and the table has room; nil past the bound.
    public func assign(_ room: RoomKey) -> CompactEncoding.RoomAlias? {
        state.withLock { s in
            if let a = s.byRoom[room] { return a }
            guard s.byRoom.count < bound else { return nil }
            let a = CompactEncoding.RoomAlias(roomId: room.roomId, number: s.next)
            s.next += 1
            s.byRoom[room] = a
            return a
        }
    }

    /// The room's alias, if it has one (never given here).
    public func alias(of room: RoomKey) -> CompactEncoding.RoomAlias? {
        state.withLock { $0.byRoom[room] }
    }

    public var count: Int { state.withLock { $0.byRoom.count } }
}
