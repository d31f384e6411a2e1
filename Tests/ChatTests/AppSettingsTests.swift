import Foundation
import Testing
@testable import Chat

/// App settings changed by partial patches the domain merges (RC-2, RC-4, NIM-2, NIM-8, NIM-16,
/// ZIM-5, CS-4 and the per-app Origin allowlist of SPEC §2).
@Suite("App settings patches")
struct AppSettingsTests {
    func settings(_ h: Harness) -> AppSettings? {
        guard case .appSettings(let s)? = h.query(.appSettings(app: h.app)) else { return nil }
        return s
    }

    func patch(_ h: Harness, _ p: AppSettingsPatch) -> Outcome {
        h.run(.updateAppSettings(app: h.app, p))
    }

    // RC-4 and NIM-2: two patches of different fields, one after the other, keep both (the
    // lost-update fix: the engine merges, the caller no longer sends whole settings).
    @Test func patchesOfDifferentFieldsKeepEachOther() {
        let h = Harness()
        let first = patch(h, AppSettingsPatch(multipleRoomsPerUser: true))
        let second = patch(h, AppSettingsPatch(maxRoomsPerUser: 3))
        #expect(first.succeeded && second.succeeded)
        var expected = AppSettings()
        expected.multipleRoomsPerUser = true
        expected.maxRoomsPerUser = 3
        #expect(settings(h) == expected)
        #expect(second.reply == .success(.appSettings(expected)))
        #expect(second.mutations == [.putApp(h.app, expected)])
        // The first patch's mutation held only its own change.
        var afterFirst = AppSettings()
        afterFirst.multipleRoomsPerUser = true
        #expect(first.mutations == [.putApp(h.app, afterFirst)])
    }

    // NIM-8, NIM-16, ZIM-5, CS-4, RC-2: every field is applied; retention arrives in seconds.
    @Test func everyFieldIsApplied() {
        let h = Harness()
        let out = patch(h, AppSettingsPatch(memberChangeEvents: false, multipleRoomsPerUser: true, enterExitNotifications: false,
                                            maxRoomsPerUser: 1000, maxRooms: 0, historyRetentionSeconds: 60, historyLimitPerRoom: 100_000,
                                            maxMessageBytes: 1_048_576, defaultQueueLimit: 10_000, notificationLevel: .mention,
                                            allowedOrigins: ["https://a.example", "*.b.example"]))
        var expected = AppSettings()
        expected.memberChangeEvents = false
        expected.multipleRoomsPerUser = true
        expected.enterExitNotifications = false
        expected.maxRoomsPerUser = 1000
        expected.maxRooms = 0
        expected.historyRetentionMilliseconds = 60_000
        expected.historyLimitPerRoom = 100_000
        expected.maxMessageBytes = 1_048_576
        expected.defaultQueueLimit = 10_000
        expected.notificationLevel = .mention
        expected.allowedOrigins = ["https://a.example", "*.b.example"]
        #expect(out.reply == .success(.appSettings(expected)))
        #expect(settings(h) == expected)
        #expect(out.mutations == [.putApp(h.app, expected)])
    }

    // Each bad field is refused with its name and the REST messages; nothing changes, even when
    // other fields of the same patch are good.
    @Test(arguments: [
        (AppSettingsPatch(maxRoomsPerUser: 0), "maxRoomsPerUser", "maxRoomsPerUser must be 1 to 1000"),
        (AppSettingsPatch(maxRoomsPerUser: 1001), "maxRoomsPerUser", "maxRoomsPerUser must be 1 to 1000"),
        (AppSettingsPatch(maxRooms: -1), "maxRooms", "maxRooms must not be negative"),
        (AppSettingsPatch(historyRetentionSeconds: 59), "historyRetentionSeconds", "historyRetentionSeconds must be 60 to 31536000"),
        (AppSettingsPatch(historyRetentionSeconds: 31_536_001), "historyRetentionSeconds", "historyRetentionSeconds must be 60 to 31536000"),
        (AppSettingsPatch(historyRetentionSeconds: .max), "historyRetentionSeconds", "historyRetentionSeconds must be 60 to 31536000"),
        (AppSettingsPatch(historyLimitPerRoom: 0), "historyLimitPerRoom", "historyLimitPerRoom must be 1 to 100000"),
        (AppSettingsPatch(historyLimitPerRoom: 100_001), "historyLimitPerRoom", "historyLimitPerRoom must be 1 to 100000"),
        (AppSettingsPatch(maxMessageBytes: 0), "maxMessageBytes", "maxMessageBytes must be 1 to 1048576"),
        (AppSettingsPatch(maxMessageBytes: 1_048_577), "maxMessageBytes", "maxMessageBytes must be 1 to 1048576"),
        (AppSettingsPatch(defaultQueueLimit: 0), "defaultQueueLimit", "defaultQueueLimit must be 1 to 10000"),
        (AppSettingsPatch(defaultQueueLimit: 10_001), "defaultQueueLimit", "defaultQueueLimit must be 1 to 10000"),
        (AppSettingsPatch(allowedOrigins: Array(repeating: "https://a.example", count: 101)), "allowedOrigins",
         "allowedOrigins holds up to 100 origins"),
        (AppSettingsPatch(allowedOrigins: ["https://a.example", ""]), "allowedOrigins", "allowedOrigins holds up to 100 origins"),
        (AppSettingsPatch(allowedOrigins: [String(repeating: "a", count: 257)]), "allowedOrigins", "allowedOrigins holds up to 100 origins"),
    ])
    func badFieldIsRefusedAndChangesNothing(_ bad: AppSettingsPatch, _ field: String, _ message: String) {
        let h = Harness()
        #expect(patch(h, AppSettingsPatch(maxRooms: 5, allowedOrigins: ["https://keep.example"])).succeeded)
        let before = settings(h)
        // The good fields ride along with the bad one and must not be applied either.
        var p = bad
        p.memberChangeEvents = false
        p.notificationLevel = .blocked
        let out = patch(h, p)
        #expect(out.error == ChatError(.invalidParameter, message, field: field))
        #expect(out.mutations.isEmpty && out.effects.isEmpty)
        #expect(settings(h) == before)
    }

    // The largest values in range are accepted (bounds are inclusive).
    @Test func boundsAreInclusive() {
        let h = Harness()
        let lows = patch(h, AppSettingsPatch(maxRoomsPerUser: 1, historyRetentionSeconds: 60, historyLimitPerRoom: 1, maxMessageBytes: 1,
                                             defaultQueueLimit: 1, allowedOrigins: [String(repeating: "a", count: 256)]))
        #expect(lows.succeeded)
        let highs = patch(h, AppSettingsPatch(maxRoomsPerUser: 1000, maxRooms: Int.max, historyRetentionSeconds: 31_536_000,
                                              allowedOrigins: Array(repeating: "*", count: 100)))
        #expect(highs.succeeded)
        #expect(settings(h)?.historyRetentionMilliseconds == 31_536_000_000)
        #expect(settings(h)?.allowedOrigins?.count == 100)
    }

    // An empty allowedOrigins clears the allowlist (any origin); an absent one keeps it.
    @Test func emptyAllowedOriginsClearsToNil() {
        let h = Harness()
        #expect(patch(h, AppSettingsPatch(allowedOrigins: ["https://a.example"])).succeeded)
        #expect(patch(h, AppSettingsPatch(maxRooms: 7)).succeeded)
        #expect(settings(h)?.allowedOrigins == ["https://a.example"])
        let cleared = patch(h, AppSettingsPatch(allowedOrigins: []))
        var expected = AppSettings()
        expected.maxRooms = 7
        #expect(cleared.reply == .success(.appSettings(expected)))
        #expect(cleared.mutations == [.putApp(h.app, expected)])
        #expect(settings(h)?.allowedOrigins == nil)
    }

    // A patch that changes nothing answers the settings and writes nothing.
    @Test func unchangedPatchWritesNothing() {
        let h = Harness()
        let out = patch(h, AppSettingsPatch(memberChangeEvents: true, maxRoomsPerUser: AppSettings().maxRoomsPerUser))
        #expect(out.reply == .success(.appSettings(AppSettings())))
        #expect(out.mutations.isEmpty)
        #expect(patch(h, AppSettingsPatch()).reply == .success(.appSettings(AppSettings())))
    }

    @Test func unknownAppIsRefused() {
        let h = Harness()
        let out = h.run(.updateAppSettings(app: "nope", AppSettingsPatch(maxRooms: 1)))
        #expect(out.error?.code == .unknownApp)
        #expect(out.mutations.isEmpty)
        #expect(h.domain.appSettings("nope") == nil)
        #expect(h.domain.query(.appSettings(app: "nope"), now: h.now).error?.code == .unknownApp)
    }

    // The merged settings take effect: ZIM-5's room limit applies to the next creation.
    @Test func mergedSettingsTakeEffect() {
        let h = Harness()
        #expect(patch(h, AppSettingsPatch(maxRooms: 1)).succeeded)
        #expect(h.createRoom("r1").succeeded)
        #expect(h.createRoom("r2").error?.code == .roomLimitReached)
    }

    // configureApp (start-up, tools) still replaces settings whole; an empty allowlist there is
    // stored as nil, and a bad one is refused like in a patch.
    @Test func configureAppStillReplacesSettings() {
        let h = Harness()
        var s = AppSettings()
        s.maxRooms = 3
        s.allowedOrigins = []
        let out = h.run(.configureApp(app: h.app, s))
        s.allowedOrigins = nil
        #expect(out.mutations == [.putApp(h.app, s)])
        #expect(settings(h) == s)
        var bad = AppSettings()
        bad.allowedOrigins = [""]
        #expect(h.run(.configureApp(app: h.app, bad)).error?.field == "allowedOrigins")
        #expect(settings(h) == s)
    }

    // Settings stored by an older version (no allowedOrigins) decode with nil; new ones round-trip.
    @Test func settingsJSONRoundTrips() throws {
        let old = #"{"memberChangeEvents":false,"maxRooms":4}"#
        let decoded = try JSONDecoder().decode(AppSettings.self, from: Data(old.utf8))
        #expect(decoded.allowedOrigins == nil && decoded.maxRooms == 4 && !decoded.memberChangeEvents)
        var s = AppSettings()
        s.allowedOrigins = ["https://a.example"]
        #expect(try JSONDecoder().decode(AppSettings.self, from: JSONEncoder().encode(s)) == s)
    }
}
