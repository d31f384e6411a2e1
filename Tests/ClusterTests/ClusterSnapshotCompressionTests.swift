@testable import Cluster
import Testing

/// Issue 31 (CL-9): a snapshot part through zlib and back, without PostgreSQL, with chunks and
/// zlib's pieces (1 GiB in production: its lengths are 32-bit) made tiny so that every boundary
/// falls everywhere: the part comes back byte for byte or is refused, never wrong.
@Suite("Cluster snapshot compression (CL-9)")
struct ClusterSnapshotCompressionTests {
    static func compressed(_ bytes: [UInt8], chunkBytes: Int, piece: Int) throws -> (SnapshotCompression.Part, [[UInt8]]) {
        var chunks: [[UInt8]] = []
        let part = try SnapshotCompression.compress(bytes, chunkBytes: chunkBytes, level: 1, piece: piece) { chunks.append($0) }
        return (part, chunks)
    }

    static func decompressed(_ part: SnapshotCompression.Part, _ chunks: [[UInt8]], piece: Int) throws(PGError) -> [UInt8] {
        var part = part
        part.compressedBytes = chunks.reduce(0) { $0 + $1.count }
        return try SnapshotCompression.decompress(part, piece: piece) { i, body throws(PGError) in
            let failed = chunks[i].withUnsafeBytes { b -> PGError? in
                do throws(PGError) { try body(b) } catch { return error }
                return nil
            }
            if let failed { throw failed }
        }
    }

    static func sample(_ n: Int, seed: UInt64) -> [UInt8] {
        var x = seed
        return (0..<n).map { i in
            x = x &* 6364136223846793005 &+ 1442695040888963407
            // Runs and text-like stretches between noise, so matches cross every boundary.
            return i % 1000 < 400 ? UInt8(truncatingIfNeeded: x >> 56) : UInt8(ascii: "a") + UInt8(i % 7)
        }
    }

    @Test(arguments: [(0, 1, 1), (1, 1, 1), (5_000, 1, 3), (5_000, 7, 1), (20_000, 64, 5), (20_000, 333, 4_096), (100_000, 4_096, 1_000), (100_000, 100_000, 1 << 30)])
    func roundTrips(size: Int, chunkBytes: Int, piece: Int) throws {
        let bytes = Self.sample(size, seed: UInt64(size + chunkBytes))
        let (part, chunks) = try Self.compressed(bytes, chunkBytes: chunkBytes, piece: piece)
        #expect(part.bytes == size && part.chunks == chunks.count && chunks.count >= 1)
        #expect(chunks.dropLast().allSatisfy { $0.count == chunkBytes } && chunks.last!.count <= chunkBytes && !chunks.last!.isEmpty)
        #expect(part.crc == bytes.withUnsafeBytes { SnapshotCompression.crc32($0) })
        #expect(try Self.decompressed(part, chunks, piece: piece) == bytes)
        // Read with other pieces than it was written with.
        #expect(try Self.decompressed(part, chunks, piece: 2) == bytes)
    }

    @Test func aDamagedPartIsRefused() throws {
        let bytes = Self.sample(30_000, seed: 1)
        let (part, chunks) = try Self.compressed(bytes, chunkBytes: 500, piece: 1 << 30)
        func refused(_ what: String, _ part: SnapshotCompression.Part, _ chunks: [[UInt8]]) {
            do {
                _ = try Self.decompressed(part, chunks, piece: 1 << 30)
                Issue.record("\(what): accepted")
            } catch {
                #expect(error.sqlState == "XX001" && error.message.contains("damaged"), "\(what): \(error)")
            }
        }
        // Every bit of a few bytes in turn, at the start, middle and end of the stream.
        for (c, o) in [(0, 0), (0, 1), (0, 2), (5, 250), (chunks.count / 2, 499), (chunks.count - 1, chunks.last!.count - 1)] {
            for bit in 0..<8 {
                var damaged = chunks
                damaged[c][o] ^= UInt8(1 << bit)
                refused("bit \(bit) of byte \(o) of chunk \(c)", part, damaged)
            }
        }
        refused("a chunk missing", SnapshotCompression.Part(bytes: part.bytes, crc: part.crc, chunks: part.chunks - 1, compressedBytes: 0),
                Array(chunks.dropLast()))
        refused("two chunks swapped", part, [chunks[1], chunks[0]] + chunks.dropFirst(2))
        refused("an extra byte", part, chunks.dropLast() + [chunks.last! + [0]])
        var extra = part
        extra.chunks += 1
        refused("an extra chunk", extra, chunks + [[1, 2, 3]])
        refused("an empty chunk", extra, chunks + [[]])
        for (what, changed) in [("shorter", -1), ("longer", 1)] {
            var p = part
            p.bytes += changed
            refused("the length \(what)", p, chunks)
        }
        var crc = part
        crc.crc ^= 0x8000_0000
        refused("the CRC-32", crc, chunks)
    }

    /// The part's bytes fed in pieces of `sizes` (in turn), as the leader reads its copy on disk.
    static func streamed(_ bytes: [UInt8], sizes: [Int], chunkBytes: Int, piece: Int) throws -> (SnapshotCompression.Part, [[UInt8]]) {
        var chunks: [[UInt8]] = []
        let part = try SnapshotCompression.compress(chunkBytes: chunkBytes, level: 1, piece: piece, input: { feed throws(PGError) in
            var offset = 0, turn = 0
            while offset < bytes.count {
                let n = min(bytes.count - offset, sizes[turn % sizes.count])
                var failed: PGError?
                bytes[offset..<offset + n].withUnsafeBytes { b in
                    do throws(PGError) { try feed(b) } catch { failed = error }
                }
                if let failed { throw failed }
                offset += n
                turn += 1
            }
        }, emit: { chunks.append($0) })
        return (part, chunks)
    }

    /// Put back together in output pieces of at most `outputBytes` (as a starting node writes
    /// its replica's file), each checked for size.
    static func written(_ part: SnapshotCompression.Part, _ chunks: [[UInt8]], piece: Int, outputBytes: Int) throws(PGError) -> [UInt8] {
        var part = part
        part.compressedBytes = chunks.reduce(0) { $0 + $1.count }
        var out: [UInt8] = []
        var oversized = false
        try SnapshotCompression.decompress(part, piece: piece, outputBytes: outputBytes, chunk: { i, body throws(PGError) in
            let failed = chunks[i].withUnsafeBytes { b -> PGError? in
                do throws(PGError) { try body(b) } catch { return error }
                return nil
            }
            if let failed { throw failed }
        }, output: { (bytes: UnsafeRawBufferPointer) throws(PGError) in
            if bytes.count > outputBytes || bytes.isEmpty { oversized = true }
            out.append(contentsOf: bytes)
        })
        #expect(!oversized, "an output piece beyond \(outputBytes) bytes, or an empty one")
        return out
    }

    /// CL-9: a part read in pieces (the leader's replica, from its copy on disk) and written out in
    /// pieces (a starting node's replica file) round-trips across every boundary, describes itself
    /// as the part read whole does, and a damaged one is refused.
    @Test("CL-9: a part streamed in and out in pieces round-trips; damage is refused",
          arguments: [(0, [1], 1, 1, 1), (7_000, [1, 2, 3], 5, 3, 2), (50_000, [4_096], 500, 1 << 30, 1_000), (80_000, [1, 9_999, 333], 4_096, 777, 65_536),
                      (120_000, [120_000], 120_000, 1 << 30, 1)])
    func streamsRoundTrip(size: Int, sizes: [Int], chunkBytes: Int, piece: Int, outputBytes: Int) throws {
        let bytes = Self.sample(size, seed: UInt64(size + 3))
        let (part, chunks) = try Self.streamed(bytes, sizes: sizes, chunkBytes: chunkBytes, piece: piece)
        let (whole, _) = try Self.compressed(bytes, chunkBytes: chunkBytes, piece: piece)
        #expect(part.bytes == whole.bytes && part.crc == whole.crc && part.bytes == size)
        #expect(part.chunks == chunks.count && chunks.dropLast().allSatisfy { $0.count == chunkBytes })
        #expect(try Self.written(part, chunks, piece: piece, outputBytes: outputBytes) == bytes)
        #expect(try Self.decompressed(part, chunks, piece: piece) == bytes)
        guard size > 1_000 else { return }
        for (c, o) in [(0, 2), (chunks.count / 2, chunks[chunks.count / 2].count / 2), (chunks.count - 1, chunks.last!.count - 1)] {
            var damaged = chunks
            damaged[c][o] ^= 0x10
            do {
                _ = try Self.written(part, damaged, piece: piece, outputBytes: outputBytes)
                Issue.record("byte \(o) of chunk \(c) changed: accepted")
            } catch {
                #expect(error.sqlState == "XX001" && error.message.contains("damaged"), "\(error)")
            }
        }
    }
}
