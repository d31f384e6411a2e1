import Chat

// MARK: Member tags (AU-1) on the native REST API

/// `PUT /v1/rooms/{roomId}/members/{userId}/tags`: a present member's tags, replaced whole.
public struct SetMemberTagsRequest: Decodable, Sendable {
    public var tags: [String]
    /// The members this expression matches are told with a 316 member-info notification.
    public var notifyTargetTags: TagExpressionJSON?

    public func command(_ caller: Caller, roomId: String, userId: String) throws(ChatError) -> Command {
        .setMemberTags(app: caller.app, roomId: roomId, userId: userId, tags,
                       notifyTargetTags: try notifyTargetTags.map { e throws(ChatError) in try TagExpression.from(e, field: "notifyTargetTags") })
    }
}

/// `PUT /v1/rooms/{roomId}/tags/{tag}/mute`: the tag's members may not send for `seconds`
/// (0 lifts it); NIM's notification (314/315) when `needNotify` is not false.
public struct TagMuteRequest: Decodable, Sendable {
    public var seconds: Int
    public var needNotify: Bool?
    public var notifyExt: String?
    /// Who is told (default: the members with the tag).
    public var notifyTargetTags: TagExpressionJSON?

    public func command(_ caller: Caller, roomId: String, tag: String) throws(ChatError) -> Command {
        let notify = needNotify == false ? nil : NIMNotify(notifyExt: notifyExt ?? "")
        return .tagMute(app: caller.app, roomId: roomId, tag: tag, seconds: seconds, notify: notify,
                        notifyTargetTags: try notifyTargetTags.map { e throws(ChatError) in try TagExpression.from(e, field: "notifyTargetTags") },
                        caller.actor)
    }
}

/// `GET /v1/rooms/{roomId}/tags/{tag}/members`: the present members carrying a tag, paged.
public struct TagMembersRequest: Sendable {
    public var limit: Int?
    public var after: String?

    public init(query q: QueryParameters) throws(ChatError) {
        limit = try q.int("limit")
        after = q.string("cursor")
    }

    public func query(_ caller: Caller, roomId: String, tag: String) -> Query {
        .tagMembers(app: caller.app, roomId: roomId, tag: tag, limit: limit ?? 100, after: after)
    }
}

// MARK: Many rooms at once (AU-3)

/// `POST /v1/messages`: one message to each of the listed rooms (all or none). The body is a
/// room send's (`SendMessageRequest`) with `roomIds` beside it.
public struct SendToRoomsRequest: Decodable, Sendable {
    public var roomIds: [String]
    public var type: String?
    public var content: String
    public var fromUserId: String?
    public var nickname: String?
    public var avatar: String?
    public var priority: String?
    public var messageType: String?
    public var transient: Bool?
    public var targets: [String]?
    public var targetTags: TagExpressionJSON?

    var send: SendMessageRequest {
        SendMessageRequest(type: type, content: content, fromUserId: fromUserId, nickname: nickname, avatar: avatar, priority: priority,
                           messageType: messageType, transient: transient, targets: targets, targetTags: targetTags)
    }

    public func command(_ caller: Caller) throws(ChatError) -> Command {
        let send = self.send
        return .sendToRooms(app: caller.app, roomIds: roomIds, send.serverSender, try parseKind(type), content: content, options: try send.options())
    }
}

/// `POST /v1/messages/broadcast`: one message to the members present in every room of the app.
public struct BroadcastRequest: Decodable, Sendable {
    public var type: String?
    public var content: String
    public var fromUserId: String?
    public var nickname: String?
    public var avatar: String?
    public var priority: String?
    public var messageType: String?

    public func command(_ caller: Caller) throws(ChatError) -> Command {
        let send = SendMessageRequest(type: type, content: content, fromUserId: fromUserId, nickname: nickname, avatar: avatar, priority: priority,
                                      messageType: messageType, transient: nil, targets: nil, targetTags: nil)
        return .broadcast(app: caller.app, send.serverSender, try parseKind(type), content: content, options: try send.options())
    }
}
