import Chat

/// What RongCloud v1 and Nexconn v4 (its 2026 rebrand) read and write alike under their own
/// field names.
enum RongCloudFamily {
    /// `needNotify` with `extra` (RC-5, RC-6, RC-8).
    static func notify(_ p: VendorParams) throws(ChatError) -> RCNotify? {
        RCNotify.given(needNotify: try p.bool("needNotify"), extra: try p.string("extra"))
    }

    /// `destroyType` 0 (when inactive) / 1 (at a fixed time) with its minutes (default 60).
    static func destroyPolicy(_ p: VendorParams, minutesKey: String) throws(ChatError) -> DestroyPolicy {
        let minutes = try p.int(minutesKey) ?? Limits.minDestroyMinutes
        switch try p.int("destroyType") ?? 0 {
        case 0: return .inactive(minutes: minutes)
        case 1: return .fixed(minutes: minutes)
        default: throw ChatError(.invalidParameter, "destroyType must be 0 (when inactive) or 1 (at a fixed time)", field: "destroyType")
        }
    }

    /// A room's destroy policy; a ZIM-style one (destroyed once empty) has no RongCloud spelling,
    /// so neither field is written for it rather than an invented value.
    static func writeDestroy(_ w: inout JSONWriter, _ policy: DestroyPolicy, minutesKey: String) {
        switch policy {
        case .inactive(let m): w.field("destroyType", 0); w.field(minutesKey, m)
        case .fixed(let m): w.field("destroyType", 1); w.field(minutesKey, m)
        case .whenEmpty: break
        }
    }

    /// `order` 1 (join time ascending, the default) or 2 (descending).
    static func joinOrder(_ p: VendorParams) throws(ChatError) -> SortOrder {
        switch try p.int("order") ?? 1 {
        case 1: return .ascending
        case 2: return .descending
        default: throw ChatError(.invalidParameter, "order must be 1 (join time ascending) or 2 (descending)", field: "order")
        }
    }

    /// Users with the end of their block or mute as `yyyy-MM-dd HH:mm:ss` (UTC). Permanent entries
    /// have no end; the vendor lists only timed ones, so none is invented.
    static func writeExpiries(_ w: inout JSONWriter, _ key: String, idKey: String, timeKey: String, _ items: [(userId: String, until: Int64?)]) {
        w.key(key)
        w.beginArray()
        for item in items {
            w.beginObject()
            w.field(idKey, item.userId)
            if let until = item.until { w.field(timeKey, VendorTime.dateTime(milliseconds: until)) }
            w.endObject()
        }
        w.endArray()
    }
}
