import Testing
@testable import Chat

/// Issue 32's idle session: the per-session and per-member records the domain keeps inline in its
/// dictionaries, whose sizes an idle joined session pays (times the dictionaries' free slots).
/// A field added in the wrong place (a flag between two 8-byte fields) fails here.
@Suite struct RecordSizeTests {
    @Test func theDomainsSessionAndMemberRecordsStaySmall() {
        // Session: its app (a reference), user and device ids (16 each), connectedAt, the profile
        // box (with the anonymous flag), its rooms (one inline, last).
        #expect(MemoryLayout<Session>.stride == 80)
        // Member: user id, its sessions (one inline), role, anonymous and its join-order slot in the
        // padding after them, enter time, the details box.
        #expect(MemoryLayout<Member>.stride == 48)
        #expect(MemoryLayout<SessionList>.size == 9)
    }
}
