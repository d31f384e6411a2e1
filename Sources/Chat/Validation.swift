/// Input checks. Each names the field it refuses, and runs before any state changes.
public enum Validate {
    /// Ids of rooms, users, apps: 1…maxBytes bytes of visible ASCII without `/`, `?`, `#`, `%`,
    /// quotes or backslash (they travel in URL paths and JSON).
    public static func identifier(_ s: String, field: String, maxBytes: Int) throws(ChatError) {
        let u = s.utf8
        guard !u.isEmpty else { throw .invalid(field, "\(field) must not be empty") }
        guard u.count <= maxBytes else { throw .invalid(field, "\(field) must be at most \(maxBytes) bytes") }
        for b in u {
            let ok = b > 0x20 && b < 0x7F && b != 0x2F && b != 0x3F && b != 0x23 && b != 0x25 && b != 0x22 && b != 0x5C
            guard ok else { throw .invalid(field, "\(field) has a character that is not allowed") }
        }
    }

    static func roomId(_ s: String, field: String = "roomId") throws(ChatError) {
        try identifier(s, field: field, maxBytes: Limits.maxRoomIdBytes)
    }

    static func userId(_ s: String, field: String = "userId") throws(ChatError) {
        try identifier(s, field: field, maxBytes: Limits.maxUserIdBytes)
    }

    /// 1…max distinct user ids (RC-8: at most 20 per call).
    static func userIds(_ ids: [String], field: String = "userIds", max: Int = Limits.maxUsersPerCall) throws(ChatError) {
        guard !ids.isEmpty else { throw .invalid(field, "\(field) must not be empty") }
        guard ids.count <= max else { throw .invalid(field, "\(field) has \(ids.count) ids; at most \(max) are allowed") }
        for id in ids { try userId(id, field: field) }
        // Pairwise for short lists: cheaper than building a Set for the usual 1–20 ids.
        if ids.count <= 32 {
            for i in ids.indices.dropFirst() where ids[..<i].contains(ids[i]) { throw .invalid(field, "\(field) has duplicates") }
        } else if Set(ids).count != ids.count {
            throw .invalid(field, "\(field) has duplicates")
        }
    }

    /// RC-8: durations are 1…43200 minutes.
    static func minutes(_ m: Int, field: String = "minutes") throws(ChatError) {
        guard m >= Limits.minDurationMinutes && m <= Limits.maxDurationMinutes else {
            throw .invalid(field, "\(field) must be between \(Limits.minDurationMinutes) and \(Limits.maxDurationMinutes)")
        }
    }

    static func maxBytes(_ s: String, _ max: Int, field: String) throws(ChatError) {
        guard s.utf8.count <= max else { throw .invalid(field, "\(field) must be at most \(max) bytes") }
    }

    /// RC-8: `extra` is a JSON string (empty allowed).
    static func extra(_ s: String, field: String = "extra") throws(ChatError) {
        try maxBytes(s, Limits.maxExtraBytes, field: field)
    }

    static func notifyExt(_ s: String, field: String = "notifyExt") throws(ChatError) {
        try maxBytes(s, Limits.maxNotifyExtBytes, field: field)
    }

    /// RC-10: keys of up to 128 characters from `A-Z a-z 0-9 + = - _`.
    static func attributeKey(_ k: String, field: String = "key") throws(ChatError) {
        guard !k.isEmpty, k.utf8.count <= Limits.maxAttributeKeyChars else {
            throw .invalid(field, "attribute keys are 1 to \(Limits.maxAttributeKeyChars) characters")
        }
        for b in k.utf8 {
            let ok = (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2B || b == 0x3D || b == 0x2D || b == 0x5F
            guard ok else { throw .invalid(field, "attribute key '\(k)' may only contain letters, digits, + = - _") }
        }
    }

    static func queueKey(_ k: String, max: Int, field: String = "key") throws(ChatError) {
        guard !k.isEmpty else { throw .invalid(field, "queue keys must not be empty") }
        guard k.utf8.count <= max else { throw .invalid(field, "queue keys are at most \(max) bytes") }
    }

    static func destroyPolicy(_ p: DestroyPolicy, field: String = "destroy") throws(ChatError) {
        switch p {
        case .inactive(let m), .fixed(let m):
            guard m >= Limits.minDestroyMinutes && m <= Limits.maxDestroyMinutes else {
                throw .invalid(field + ".minutes", "destroy minutes must be between \(Limits.minDestroyMinutes) and \(Limits.maxDestroyMinutes)")
            }
        case .whenEmpty(let s):
            guard s >= 0 && s <= Limits.maxDestroyDelaySeconds else {
                throw .invalid(field + ".seconds", "destroy delay must be between 0 and \(Limits.maxDestroyDelaySeconds) seconds")
            }
        }
    }

    static func profile(_ p: EnterProfile) throws(ChatError) {
        try maxBytes(p.nickname, Limits.maxNicknameBytes, field: "nickname")
        try maxBytes(p.avatar, Limits.maxAvatarBytes, field: "avatar")
        try maxBytes(p.ext, Limits.maxExtBytes, field: "ext")
        try notifyExt(p.notifyExt)
        if let t = p.tags { _ = try tags(t, field: "tags") }
        try p.notifyTargetTags?.validate(field: "notifyTargetTags")
    }

    static func roomConfig(_ c: RoomConfig) throws(ChatError) {
        try roomId(c.roomId)
        try maxBytes(c.name, Limits.maxNameBytes, field: "name")
        try maxBytes(c.announcement, Limits.maxAnnouncementBytes, field: "announcement")
        try maxBytes(c.ext, Limits.maxExtBytes, field: "ext")
        try maxBytes(c.broadcastUrl, Limits.maxBroadcastUrlBytes, field: "broadcastUrl")
        if let creator = c.creator { try userId(creator, field: "creator") }
        try destroyPolicy(c.destroyPolicy)
        if !c.muteAllowlist.isEmpty { try userIds(c.muteAllowlist, field: "muteAllowlist", max: Limits.maxAllowlist) }
        guard c.attributes.count <= Limits.maxAttributesAtCreation else {
            throw .invalid("attributes", "at most \(Limits.maxAttributesAtCreation) attributes at creation")
        }
        // In key order: which bad attribute is reported must not depend on the hash seed.
        for (k, v) in c.attributes.sorted(by: { $0.key < $1.key }) {
            try attributeKey(k, field: "attributes")
            try maxBytes(v, Limits.maxAttributeValueBytes, field: "attributes.\(k)")
        }
        if let owner = c.attributesOwner { try userId(owner, field: "attributesOwner") }
        if let q = c.queueLimit, q < 1 || q > Limits.maxQueueLimit { throw .invalid("queueLimit", "queueLimit must be between 1 and \(Limits.maxQueueLimit)") }
    }
}
