import Chat
import Foundation

extension LogRecord {
    /// The bytes of a record in the cluster's log: its binary form where it has one (the hot
    /// records: `Chat/LogCodec.swift`) and the cluster's `format` allows it, else the JSON of the
    /// `Codable` record.
    public static func encode(_ record: LogRecord, format: Int = LogRecord.format) throws -> [UInt8] {
        if format >= binaryFormat, let bytes = binary(record) { return bytes }
        return Array(try JSONEncoder().encode(record))
    }

    public static func decode(_ bytes: [UInt8]) throws -> LogRecord {
        if bytes.first == jsonMark { return try JSONDecoder().decode(LogRecord.self, from: Data(bytes)) }
        return try decodeBinary(bytes)
    }
}
