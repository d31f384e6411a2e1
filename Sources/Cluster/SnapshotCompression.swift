import CZlib

/// A snapshot part's bytes through zlib (CLUSTER.md "Snapshots and trimming"): compressed as one
/// zlib stream cut into chunks of at most a given size, and put back together from them with
/// their length and CRC-32 checked. Chunks are handed out (or taken in) one at a time, and a part
/// can be read in and written out in pieces (a file), so neither side needs the whole of it in
/// memory: one chunk and one piece.
enum SnapshotCompression {
    /// What a part's chunks describe: its length and CRC-32 before compression, how many chunks
    /// and how many compressed bytes in all.
    struct Part: Equatable {
        var bytes: Int
        var crc: UInt32
        var chunks: Int
        var compressedBytes: Int
    }

    /// zlib takes lengths as 32-bit `uInt`: longer inputs and outputs are handed over in pieces of
    /// at most this many bytes (tests make them tiny).
    static let piece = 1 << 30

    /// zlib's error for `rc`, as the cluster's error type.
    static func failure(_ what: String, _ rc: Int32, _ stream: UnsafeMutablePointer<z_stream>) -> PGError {
        let detail = stream.pointee.msg.map { String(cString: $0) } ?? "zlib code \(rc)"
        return PGError(sqlState: "XX001", message: "\(what): \(detail)")
    }

    /// The CRC-32 of `bytes` (zlib's), continuing from `crc`.
    static func crc32(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0, piece: Int = piece) -> UInt32 {
        var crc = uLong(crc)
        var offset = 0
        while offset < bytes.count, let base = bytes.baseAddress {
            let n = min(bytes.count - offset, piece)
            crc = CZlib.crc32(crc, (base + offset).assumingMemoryBound(to: Bytef.self), uInt(n))
            offset += n
        }
        return UInt32(truncatingIfNeeded: crc)
    }

    /// Compresses `bytes` at `level` and hands `emit` the compressed stream in order, in chunks of
    /// exactly `chunkBytes` bytes but the last (at least one chunk: a zlib stream is never empty).
    /// The chunk `emit` receives is only lent: copy what must outlive the call.
    static func compress(_ bytes: [UInt8], chunkBytes: Int, level: Int32, piece: Int = piece,
                         emit: ([UInt8]) throws(PGError) -> Void) throws(PGError) -> Part {
        try compress(chunkBytes: chunkBytes, level: level, piece: piece, input: { feed throws(PGError) in
            var failed: PGError?
            bytes.withUnsafeBytes { all in
                do throws(PGError) { try feed(all) } catch { failed = error }
            }
            if let failed { throw failed }
        }, emit: emit)
    }

    /// The same for a part that `input` produces: it hands the function it is given the part's
    /// bytes in order, in pieces of any size (each lent for the call), e.g. as it reads them from
    /// a file. Besides one piece, one chunk is held.
    static func compress(chunkBytes: Int, level: Int32, piece: Int = piece,
                         input: ((UnsafeRawBufferPointer) throws(PGError) -> Void) throws(PGError) -> Void,
                         emit: ([UInt8]) throws(PGError) -> Void) throws(PGError) -> Part {
        try withoutActuallyEscaping(emit) { (emit) throws(PGError) -> Part in
            try deflated(chunkBytes: chunkBytes, level: level, piece: piece, input: input, emit: emit)
        }
    }

    private static func deflated(chunkBytes: Int, level: Int32, piece: Int,
                                 input: ((UnsafeRawBufferPointer) throws(PGError) -> Void) throws(PGError) -> Void,
                                 emit: @escaping ([UInt8]) throws(PGError) -> Void) throws(PGError) -> Part {
        precondition(chunkBytes > 0, "a snapshot chunk holds at least one byte")
        precondition(piece > 0 && piece <= Self.piece, "zlib is handed 1 byte to 1 GiB at a time")
        // The z_stream must not move after deflateInit2 (zlib keeps a pointer back to it).
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        defer { stream.deallocate() }
        let rc = czlib_deflate_init2(stream, level, 15, 8, Z_DEFAULT_STRATEGY)
        guard rc == Z_OK else { throw failure("the snapshot could not be compressed", rc, stream) }
        defer { deflateEnd(stream) }

        var out = [UInt8](repeating: 0, count: chunkBytes)
        var filled = 0, chunks = 0, compressed = 0, bytes = 0
        var crc: UInt32 = 0
        var ended = false
        // One call of deflate with what `stream` holds; a full chunk (or the last) is emitted.
        func step(_ flush: Int32) throws(PGError) {
            let rc = out.withUnsafeMutableBufferPointer { o -> Int32 in
                stream.pointee.next_out = o.baseAddress! + filled
                stream.pointee.avail_out = uInt(chunkBytes - filled)
                let rc = deflate(stream, flush)
                filled = chunkBytes - Int(stream.pointee.avail_out)
                return rc
            }
            switch rc {
            case Z_STREAM_END: ended = true
            case Z_OK, Z_BUF_ERROR: break  // (Z_BUF_ERROR: no progress possible this call; more room or input follows)
            default: throw failure("the snapshot could not be compressed", rc, stream)
            }
            if filled == chunkBytes || (ended && filled > 0) {
                // A full chunk is handed over as it is (no copy); the last one is cut.
                try emit(filled == chunkBytes ? out : Array(out[..<filled]))
                chunks += 1
                compressed += filled
                filled = 0
            }
        }
        try input { (bytesIn: UnsafeRawBufferPointer) throws(PGError) in
            guard let base = bytesIn.baseAddress else { return }
            var offset = 0
            while offset < bytesIn.count {
                let n = min(bytesIn.count - offset, piece)
                let slice = UnsafeRawBufferPointer(start: base + offset, count: n)
                crc = crc32(slice, continuing: crc, piece: piece)
                stream.pointee.next_in = UnsafeMutablePointer(mutating: slice.baseAddress!.assumingMemoryBound(to: Bytef.self))
                stream.pointee.avail_in = uInt(n)
                offset += n
                while stream.pointee.avail_in > 0 { try step(Z_NO_FLUSH) }
            }
            bytes += bytesIn.count
            stream.pointee.next_in = nil
        }
        while !ended { try step(Z_FINISH) }
        return Part(bytes: bytes, crc: crc, chunks: chunks, compressedBytes: compressed)
    }

    /// Puts a part back together: `chunk(i)` hands its `i`th chunk to the body it is given (the
    /// bytes only lent for the call, e.g. straight from a PostgreSQL result). The part is refused
    /// (never returned wrong) unless its chunks make one zlib stream that ends in the last chunk
    /// and gives exactly `part.bytes` bytes whose CRC-32 is `part.crc`.
    static func decompress(_ part: Part, piece: Int = piece,
                           chunk: (Int, (UnsafeRawBufferPointer) throws(PGError) -> Void) throws(PGError) -> Void) throws(PGError) -> [UInt8] {
        try checkLength(part)
        var out: [UInt8] = []
        out.reserveCapacity(part.bytes)
        try decompress(part, piece: piece, outputBytes: min(piece, 1 << 20), chunk: chunk) { (bytes: UnsafeRawBufferPointer) throws(PGError) in
            out.append(contentsOf: bytes)
        }
        return out
    }

    /// deflate expands at most about 1032 times: a length beyond that is damage, not data (and is
    /// not allocated).
    private static func checkLength(_ part: Part) throws(PGError) {
        guard part.bytes >= 0, part.chunks > 0 else {
            throw PGError(sqlState: "XX001", message: "the snapshot part's description is damaged (\(part.bytes) bytes in \(part.chunks) chunks)")
        }
        guard part.bytes / 1032 <= part.compressedBytes else {
            throw PGError(sqlState: "XX001", message: "the snapshot part is damaged: it claims \(part.bytes) bytes from \(part.compressedBytes) compressed ones")
        }
    }

    /// The same, handing the part's bytes to `output` in order as they come, in pieces of at most
    /// `outputBytes` (each lent for the call), e.g. to write them to a file: besides one chunk,
    /// one piece is held. `output` may have been handed bytes of a part that is then refused.
    static func decompress(_ part: Part, piece: Int = piece, outputBytes: Int,
                           chunk: (Int, (UnsafeRawBufferPointer) throws(PGError) -> Void) throws(PGError) -> Void,
                           output: (UnsafeRawBufferPointer) throws(PGError) -> Void) throws(PGError) {
        try withoutActuallyEscaping(output) { (output) throws(PGError) in
            try inflated(part, piece: piece, outputBytes: outputBytes, chunk: chunk, output: output)
        }
    }

    private static func inflated(_ part: Part, piece: Int, outputBytes: Int,
                                 chunk: (Int, (UnsafeRawBufferPointer) throws(PGError) -> Void) throws(PGError) -> Void,
                                 output: @escaping (UnsafeRawBufferPointer) throws(PGError) -> Void) throws(PGError) {
        precondition(piece > 0 && piece <= Self.piece, "zlib is handed 1 byte to 1 GiB at a time")
        precondition(outputBytes > 0, "output comes in pieces of at least one byte")
        try checkLength(part)
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        defer { stream.deallocate() }
        let rc = czlib_inflate_init2(stream, 15)
        guard rc == Z_OK else { throw failure("the snapshot could not be decompressed", rc, stream) }
        defer { inflateEnd(stream) }

        let damaged = { (why: String) in PGError(sqlState: "XX001", message: "the snapshot part is damaged: \(why)") }
        // Output beyond the part's length is damage: the buffer has room for it, and it is
        // refused before it is handed on.
        let room = min(outputBytes, piece, max(part.bytes, 1))
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: room, alignment: 16)
        defer { buffer.deallocate() }
        var produced = 0
        var crc: UInt32 = 0
        var ended = false
        for i in 0..<part.chunks {
            guard !ended else { throw damaged("its stream ends before chunk \(i) of \(part.chunks)") }
            try chunk(i) { (input: UnsafeRawBufferPointer) throws(PGError) in
                guard let base = input.baseAddress, input.count > 0 else { throw damaged("chunk \(i) is empty") }
                var offset = 0
                // The last call filled its output: inflate may have more without more input.
                var outputFull = false
                while !ended {
                    if stream.pointee.avail_in == 0, offset < input.count {
                        let n = min(input.count - offset, piece)
                        stream.pointee.next_in = UnsafeMutablePointer(mutating: (base + offset).assumingMemoryBound(to: Bytef.self))
                        stream.pointee.avail_in = uInt(n)
                        offset += n
                    }
                    if stream.pointee.avail_in == 0, !outputFull { break }  // on to the next chunk
                    stream.pointee.next_out = buffer.baseAddress!.assumingMemoryBound(to: Bytef.self)
                    stream.pointee.avail_out = uInt(room)
                    let rc = inflate(stream, Z_NO_FLUSH)
                    let n = room - Int(stream.pointee.avail_out)
                    outputFull = n == room
                    if n > 0 {
                        guard n <= part.bytes - produced else { throw damaged("it holds more than its \(part.bytes) bytes") }
                        let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
                        crc = crc32(bytes, continuing: crc, piece: piece)
                        produced += n
                        try output(bytes)
                    }
                    switch rc {
                    case Z_STREAM_END: ended = true
                    case Z_OK: break
                    case Z_BUF_ERROR where stream.pointee.avail_in == 0: break  // the next piece or chunk follows
                    default: throw failure("the snapshot part is damaged (chunk \(i))", rc, stream)
                    }
                }
                if ended, offset < input.count || stream.pointee.avail_in > 0 {
                    throw damaged("chunk \(i) goes on after its stream's end")
                }
                stream.pointee.next_in = nil
                stream.pointee.avail_in = 0
            }
        }
        guard ended else { throw damaged("its stream does not end in its last chunk") }
        guard produced == part.bytes else { throw damaged("it holds \(produced) bytes, not \(part.bytes)") }
        guard crc == part.crc else { throw damaged("its CRC-32 is \(crc), not \(part.crc)") }
    }
}
