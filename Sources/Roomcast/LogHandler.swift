import Foundation
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Log levels, one for all and one per subsystem (OP-4): `--log-level info` or
/// `--log-level info,store=debug,webhooks=warning`. A subsystem is the module that logs — the
/// `source` swift-log gives every call — lowercased: server, gateway, engine, store, webhooks,
/// cluster, reactor, roomcast.
struct LogLevels: Equatable, Sendable {
    var general: Logger.Level
    var bySubsystem: [String: Logger.Level]

    static let subsystems = ["server", "gateway", "engine", "store", "webhooks", "cluster", "reactor", "roomcast"]

    /// The lowest level any subsystem logs at: the handler's own level, so a call for a subsystem
    /// set lower than the rest reaches it.
    var minimum: Logger.Level { ([general] + Array(bySubsystem.values)).min() ?? general }

    func level(for subsystem: String) -> Logger.Level { bySubsystem[subsystem] ?? general }

    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    /// `LEVEL`, `SUBSYSTEM=LEVEL` or both, comma-separated (`info,store=debug`).
    static func parse(_ text: String) throws -> LogLevels {
        var levels = LogLevels(general: .info, bySubsystem: [:])
        for item in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !item.isEmpty {
            let parts = item.split(separator: "=", maxSplits: 1).map(String.init)
            guard let level = Logger.Level(rawValue: parts.last!.lowercased()) else {
                throw Invalid(description: "--log-level: unknown level '\(parts.last!)' (trace, debug, info, notice, warning, error, critical)")
            }
            if parts.count == 1 {
                levels.general = level
            } else {
                let subsystem = parts[0].lowercased()
                guard subsystems.contains(subsystem) else {
                    throw Invalid(description: "--log-level: unknown subsystem '\(parts[0])' (\(subsystems.joined(separator: ", ")))")
                }
                levels.bySubsystem[subsystem] = level
            }
        }
        return levels
    }
}

/// The process's log lines on standard error (OP-4), as text (swift-log's stream format) or JSON:
/// one object per line with the stable keys `time` (RFC 3339, UTC, milliseconds), `level`,
/// `subsystem`, `label` and `message`, then each metadata key of the call (e.g. `app`, `room`,
/// `user`, `request_id`, `error`) as its own key; a metadata key that clashes with those five is
/// written as `meta.KEY`. Metadata whose key names a credential (secret, token, signature,
/// checksum, password, authorization, nonce) is written as "[redacted]" whatever it holds: no
/// secret, token or signature reaches the log through metadata.
struct RoomcastLogHandler: LogHandler {
    enum Format: String, Sendable, CaseIterable {
        case text
        case json
    }

    let label: String
    let format: Format
    let levels: LogLevels
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level

    init(label: String, format: Format, levels: LogLevels) {
        self.label = label
        self.format = format
        self.levels = levels
        self.logLevel = levels.minimum
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    static let fixedKeys: Set<String> = ["time", "level", "subsystem", "label", "message"]

    static func isCredential(_ key: String) -> Bool {
        let k = key.lowercased()
        return ["secret", "token", "signature", "checksum", "password", "authorization", "nonce"].contains { k.contains($0) }
    }

    func log(event: LogEvent) {
        let subsystem = event.source.lowercased()
        let level = event.level
        let message = event.message
        guard level >= levels.level(for: subsystem) else { return }
        var all = metadata
        if let explicit = event.metadata { all.merge(explicit) { $1 } }
        if let error = event.error, all["error"] == nil { all["error"] = "\(error)" }
        let now = Self.wallClock()
        let text = format == .json
            ? Self.json(time: now, level: level, subsystem: subsystem, label: label, message: message.description, metadata: all)
            : Self.text(time: now, level: level, subsystem: subsystem, label: label, message: message.description, metadata: all)
        LogOutput.write(text)
    }

    // MARK: Formats

    static func text(time: (seconds: Int, milliseconds: Int), level: Logger.Level, subsystem: String, label: String, message: String,
                     metadata: Logger.Metadata) -> String {
        let pairs = metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\(isCredential($0.key) ? "[redacted]" : "\($0.value)")" }
        return "\(timestamp(time)) \(level) \(label) :\(pairs.isEmpty ? "" : " " + pairs.joined(separator: " ")) [\(subsystem)] \(message)\n"
    }

    static func json(time: (seconds: Int, milliseconds: Int), level: Logger.Level, subsystem: String, label: String, message: String,
                     metadata: Logger.Metadata) -> String {
        var out = "{"
        func field(_ key: String, _ value: String) {
            if out.count > 1 { out += "," }
            out += quoted(key) + ":" + value
        }
        field("time", quoted(timestamp(time)))
        field("level", quoted(level.rawValue))
        field("subsystem", quoted(subsystem))
        field("label", quoted(label))
        field("message", quoted(message))
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            field(fixedKeys.contains(key) ? "meta." + key : key, isCredential(key) ? quoted("[redacted]") : json(value))
        }
        return out + "}\n"
    }

    static func json(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let s): return quoted(s)
        case .stringConvertible(let c): return quoted(c.description)
        case .array(let items): return "[" + items.map(json).joined(separator: ",") + "]"
        case .dictionary(let d):
            return "{" + d.sorted { $0.key < $1.key }.map { quoted($0.key) + ":" + (isCredential($0.key) ? quoted("[redacted]") : json($0.value)) }
                .joined(separator: ",") + "}"
        }
    }

    /// A JSON string literal (RFC 8259: quote, backslash and control characters escaped).
    static func quoted(_ s: String) -> String {
        var out = "\""
        out.reserveCapacity(s.utf8.count + 2)
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    static func wallClock() -> (seconds: Int, milliseconds: Int) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return (ts.tv_sec, ts.tv_nsec / 1_000_000)
    }

    /// RFC 3339 in UTC with milliseconds: `2026-11-28T09:15:02.123Z`.
    static func timestamp(_ time: (seconds: Int, milliseconds: Int)) -> String {
        var t = time_t(time.seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour,
                      parts.tm_min, parts.tm_sec, time.milliseconds)
    }
}

/// Standard error, one whole line per write(2), so lines of different threads never interleave.
enum LogOutput {
    private static let lock = Mutex<Void>(())

    static func write(_ line: String) {
        lock.withLock { _ in
            var bytes = Array(line.utf8)
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeMutableBytes { Glibc.write(STDERR_FILENO, $0.baseAddress! + offset, $0.count - offset) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                offset += n
            }
        }
    }
}
