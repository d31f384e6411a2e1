import Chat
import Foundation

extension LogRecord {
    /// The bytes of a record in the cluster's log (JSON of the `Codable` record: every node
    /// decodes what any node of the same version encodes).
    public static func encode(_ record: LogRecord) throws -> [UInt8] {
        Array(try JSONEncoder().encode(record))
    }

    public static func decode(_ bytes: [UInt8]) throws -> LogRecord {
        try JSONDecoder().decode(LogRecord.self, from: Data(bytes))
    }
}
