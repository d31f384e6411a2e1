import Chat

/// TR-5: the compact encoding in the protocol document: its JSON Schema (`CompactServerMessage`,
/// which `scripts/websocket-schema.sh` checks the compact connections' frames against) and its
/// Markdown section. The rules themselves are `CompactEncoding`'s.
extension WebSocketDocument {
    private typealias S = OpenAPIDocument
    private static func defRef(_ name: String) -> [String: Any] { ["$ref": "#/$defs/\(name)"] }

    /// `m` or `r`: the room id, or its alias (a number the join, switch or observe answer named).
    private static func roomOrAlias(_ description: String) -> [String: Any] {
        ["oneOf": [S.str(), S.int(minimum: 1, maximum: Limits.maxRoomAliases)],
         "description": description + ": its id, or its alias on this connection (a number its join, switch or observe answer named)"]
    }

    /// `$defs` entries for the compact frames, given the JSON events' data schema names.
    static func compactDefs(events: [Event]) -> [String: Any] {
        var defs: [String: Any] = [:]
        var message: [String: Any] = [
            "m": roomOrAlias("The room (the event is room.message)"),
            "o": S.int("offset; absent for a transient message", minimum: 1),
            "n": S.str("senderNickname; absent: empty"), "a": S.str("senderAvatar; absent: empty"), "x": S.str("roomExt; absent: empty"),
            "k": ["type": "string", "enum": ["custom", "notification"], "description": "type; absent: text"],
            "c": S.str("content; absent: empty"), "t": S.int("time"),
            "f": ["const": 1, "description": "fromServer; absent: false"],
            "pr": ["type": "string", "enum": [MessagePriority.high.rawValue, MessagePriority.low.rawValue], "description": "priority; absent: normal"],
            "y": S.str("messageType; absent: none"), "tr": ["const": 1, "description": "transient; absent: false"],
            "rc": ["const": 1, "description": "recalled; absent: false"],
            "to": S.arr(S.str(), maxItems: Limits.maxMessageTargets), "tt": defRef("TagExpression"),
        ]
        message["i"] = S.str("messageId")
        message["s"] = S.str("sender")
        defs["CompactMessage"] = [
            "type": "object", "title": "room.message (compact)", "properties": message, "required": ["m", "i", "s", "t"],
            "additionalProperties": false,
            "description": "A room.message flattened: the message's fields with short keys, its roomId and the epoch left out (see openapi/websocket.md, Encodings)",
        ]
        var alternatives: [[String: Any]] = [defRef("Reply"), defRef("ErrorReply"), defRef("CompactMessage")]
        for e in events {
            var props: [String: Any] = ["e": ["const": e.ev], "r": roomOrAlias("roomId"), "d": defRef("Event." + e.ev + ".data")]
            if e.stream != .never && e.stream != .marker { props["o"] = S.int("offset (the epoch is the one the join answer named)", minimum: 1) }
            if e.stream == .marker { props["p"] = S.str("epoch") }
            var required = ["e", "d"]
            if e.stream == .always { required += ["r", "o"] }
            if e.stream == .marker { required += ["r", "p"] }
            defs["Compact." + e.ev] = ["type": "object", "title": e.ev + " (compact)", "properties": props, "required": required,
                                       "additionalProperties": false]
            alternatives.append(defRef("Compact." + e.ev))
        }
        defs["CompactServerMessage"] = ["oneOf": alternatives,
                                        "description": "What the server sends on a connection that chose roomcast.compact.v1: answers as they are, events compact"]
        return defs
    }

    static var compactMarkdown: String {
        let keys = CompactEncoding.messageKeys.map { "`\($0.short)` \($0.long)" }.joined(separator: ", ")
        return """

            ## Encodings

            A client picks how events are encoded with the WebSocket subprotocol (`Sec-WebSocket-Protocol`
            in the upgrade request; the server echoes the one it chose, RFC 6455 §4.2.2):

            - `roomcast.json.v1`: the events above. Offering no subprotocol gets the same, with nothing echoed.
            - `roomcast.compact.v1`: the same events with short keys and without what the client already
              knows; still JSON text frames (`JSON.parse` reads them). The JavaScript client asks for it by default.
            - Offers are taken in the client's order; the first one the server speaks wins. Offering only
              names the server does not speak (they are case-sensitive) is refused with HTTP 400, code 40000,
              field `Sec-WebSocket-Protocol`, and no upgrade.

            Commands and their answers are the same in both encodings; only events change. In the compact
            encoding:

            - An event `{"ev", "roomId", "epoch", "offset", "data"}` is `{"e", "r", "o", "d"}` with the same
              `data`. `epoch` is left out whenever the event has an `offset`: a connection only gets a room's
              stream events while it is a member (or an observer) of the room, and the join (or `room.observe`)
              answer named the room's epoch, which stays the same until the room is destroyed — which ends
              the membership (`room.status` destroyed). A client keeps each room's epoch from that answer
              (and its resume position) and puts it back. An event with an epoch and no offset (`room.gap`)
              keeps it as `p`. Events that had no `roomId`, `epoch` or `offset` have no `r`, `p` or `o`.
            - `room.message` is flattened: `{"m": roomId, "o": offset, ...}` with the message's own fields
              at the top, keyed \(keys). The message's `roomId` is `m`. Left out when they have their usual
              value: `n`, `a`, `x`, `c` (empty string), `k` (`text`), `f` (false); flags that are true are `1`.
              A transient message has no `o`. If a message ever carries a field this table does not list, it is
              sent in the envelope form (`{"e": "room.message", ...}`) instead, never with a guessed key.
            - Room aliases: on a compact WebSocket connection, the answers that make it a member or an
              observer of a room (`room.join`, a join with `resume`, `room.switch`, `room.observe`) carry
              `"alias": N` in `ok` (after `joinInfo`, or after `epoch`): a small positive integer that stands
              for the room on this connection. From that answer on, the room's events to the connection carry
              the number where the room id was: `{"m": 7, ...}` for `room.message`, `{"e": ..., "r": 7, ...}`
              for the others (a JSON number instead of a string; a client tells them apart by type). What came
              before the answer (a resume's replay, a rewind's messages, the join's own events) carries the
              room id, so a client never reads an alias before the answer that names it. Events sent to the
              connection for other reasons than its membership (`room.status`, `room.resume`, `room.gap`,
              events addressed to the user, such as `room.multiLoginSync` from another device) keep the room id.
              Either form may arrive; a client maps numbers back with the aliases its answers named.
            - An alias is the node's, for an (app, room) pair: every connection of the node gets the same
              number for a room (so the compact form is still derived once per event per I/O thread), two
              apps' rooms of the same id get different numbers, and a number is never reused nor changes
              meaning while the node runs: at most \(Limits.maxRoomAliases) rooms get one, in the order
              compact connections join them; later rooms keep their ids. Another node (in a cluster), or the
              same node after a restart, gives its own numbers: a client forgets its aliases when its
              connection ends and takes them from the new connection's answers (the JavaScript client does).
            - Only compact WebSocket connections get aliases. JSON connections' answers and events are
              unchanged, and so are HTTP event streams and long-polls (`encoding=compact`, openapi/sse.md):
              their answers have no `alias` and their compact events keep room ids.
            - The server encodes each event once as JSON and derives the compact form from it only when a
              compact connection receives it, once per event (or batch of events) per I/O thread and form (with
              the room's alias, or with its id); a room with no compact member costs nothing more. Replays of a
              resume are derived the same way.

            A short message (14-byte content) from the app server is about 105 bytes on the wire compact with
            the room's alias, whatever the room id's length (with the id instead: about 114 for a 6-byte id,
            135 for a 28-byte one), against about 360 in JSON.

            """
    }
}
