import Wire

/// TR-5: turns a compact frame (parsed JSON) back into the JSON encoding's event, as the
/// JavaScript client does (clients/js/roomcast.js): the tests compare what a compact and a JSON
/// client received. `epochs`: each room's epoch from its join answer (compact stream events leave
/// it out). `aliases`: the room aliases the connection's join, switch and observe answers named
/// (alias → room id; `m` or `r` may be the alias, a number, instead of the id). Frames that are not
/// compact events (answers) come back as they are; an event naming an alias not in `aliases` keeps
/// it as its `roomId` (a number), so a comparison with the JSON event fails.
public enum CompactDecoder {
    static let longKey: [String: String] = Dictionary(uniqueKeysWithValues: CompactEncoding.messageKeys.map { ($0.short, $0.long) })

    public static func decode(_ frame: [String: Any], epochs: [String: String], aliases: [Int: String] = [:]) -> [String: Any] {
        if let m = frame["m"], let room = roomId(m, aliases) {
            var message: [String: Any] = ["roomId": room, "senderNickname": "", "senderAvatar": "", "roomExt": "", "content": "",
                                          "type": "text", "fromServer": false]
            for (k, v) in frame where k != "m" && k != "o" && k != "p" {
                guard let long = longKey[k] else { continue }
                // Flags are sent as 1.
                if ["fromServer", "transient", "recalled"].contains(long), let n = v as? Int { message[long] = n == 1 } else { message[long] = v }
            }
            var event: [String: Any] = ["ev": "room.message", "roomId": room, "data": ["message": message]]
            place(frame, room: room, into: &event, epochs: epochs)
            return event
        }
        guard let ev = frame["e"] as? String else { return frame }
        var event: [String: Any] = ["ev": ev, "data": frame["d"] ?? [String: Any]()]
        if let r = frame["r"] {
            guard let room = roomId(r, aliases) else {
                event["roomId"] = r
                return event
            }
            event["roomId"] = room
            place(frame, room: room, into: &event, epochs: epochs)
        }
        return event
    }

    /// A compact `m` or `r`: a room id, or an alias the answers named.
    private static func roomId(_ value: Any, _ aliases: [Int: String]) -> String? {
        if let s = value as? String { return s }
        if let n = value as? Int { return aliases[n] }
        return nil
    }

    /// The alias a join, switch or observe answer names (`ok.alias`), if any.
    public static func alias(inAnswer frame: [String: Any]) -> Int? {
        (frame["ok"] as? [String: Any])?["alias"] as? Int
    }

    private static func place(_ frame: [String: Any], room: String, into event: inout [String: Any], epochs: [String: String]) {
        if let offset = frame["o"] {
            event["offset"] = offset
            if let e = epochs[room] { event["epoch"] = e }
        } else if let p = frame["p"] {
            event["epoch"] = p
        }
    }
}
