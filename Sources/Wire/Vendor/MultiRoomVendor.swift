import Chat

/// AU-3 on RongCloud's and Nexconn's surfaces: a message to several rooms (RongCloud's
/// `/message/chatroom/publish.json` with `toChatroomId` repeated, Nexconn's
/// `/v4/open-channel/message/send` with `toChannelIds`) and a broadcast to every room
/// (`/message/chatroom/broadcast.json`, `/v4/open-channel/message/broadcast`), each one command:
/// a missing room (the vendor's room-not-found code, naming the rooms' parameter) or a room over
/// its budget refuses the whole call and sends nothing; a second broadcast within the second gets
/// the vendor's rate-limit code (RongCloud documents 1 request a second for its broadcast).
extension RongCloudFamily {
    /// The message's type parameter (RongCloud `objectName`, Nexconn `messageType`): `RC:TxtMsg`
    /// is a text message, anything else custom; the type name travels with it (QS-1's lists).
    static func typedMessage(_ p: P, typeKey: String) throws(ChatError) -> (kind: ChatMessage.Kind, type: String, content: String) {
        let type = try p.required(typeKey)
        guard type.utf8.count <= SettingsLimits.maxMessageTypeBytes else {
            throw ChatError(.invalidParameter, "\(typeKey) is at most \(SettingsLimits.maxMessageTypeBytes) bytes", field: typeKey)
        }
        guard let content = try p.string("content"), !content.isEmpty else { throw ChatError(.invalidParameter, "content is required", field: "content") }
        return (type == "RC:TxtMsg" ? .text : .custom, type, content)
    }

    /// A 0/1 flag the vendor documents and that changes nothing here, checked all the same.
    static func flag(_ p: P, _ name: String) throws(ChatError) {
        guard let v = try p.int(name) else { return }
        guard v == 0 || v == 1 else { throw ChatError(.invalidParameter, "\(name) must be 0 or 1", field: name) }
    }

    static func sendToRooms(_ path: String, roomsKey: String, typeKey: String, priority: @escaping @Sendable (P) throws(ChatError) -> MessagePriority?,
                            flags: [String] = []) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            let from = try p.required("fromUserId")
            let ids = try p.list(roomsKey)
            guard !ids.isEmpty && ids.count <= Limits.maxRoomsPerSend else {
                throw ChatError(.invalidParameter, "\(roomsKey) names 1 to \(Limits.maxRoomsPerSend) rooms", field: roomsKey)
            }
            let m = try typedMessage(p, typeKey: typeKey)
            for f in flags { try flag(p, f) }
            let options = MessageOptions(priority: try priority(p), type: m.type)
            var call = VendorCall(.command(.sendToRooms(app: i.app, roomIds: ids, .server(userId: from, nickname: "", avatar: ""), m.kind,
                                                        content: m.content, options: options)))
            call.fields = ["roomIds": roomsKey, "type": typeKey, "messageType": typeKey]
            return .call(call)
        }
    }

    static func broadcast(_ path: String, typeKey: String, priority: @escaping @Sendable (P) throws(ChatError) -> MessagePriority?,
                          flags: [String] = []) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            let from = try p.required("fromUserId")
            let m = try typedMessage(p, typeKey: typeKey)
            for f in flags { try flag(p, f) }
            let options = MessageOptions(priority: try priority(p), type: m.type)
            var call = VendorCall(.command(.broadcast(app: i.app, .server(userId: from, nickname: "", avatar: ""), m.kind, content: m.content, options: options)))
            call.fields = ["type": typeKey, "messageType": typeKey]
            return .call(call)
        }
    }
}
