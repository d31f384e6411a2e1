@testable import Chat
import Testing
import TestKit

/// `SessionList` (a member's sessions and a user's online sessions, the first held inline) against
/// an array doing the same operations: random appends and removals, compared after every step.
@Suite("Session lists (PX-1 presence, idle session memory)")
struct SessionListTests {
    @Test func behavesAsAnArrayUnderRandomAppendsAndRemovals() {
        var rng = SplitMix64(seed: 7)
        for _ in 0..<200 {
            var list = SessionList()
            var model: [SessionID] = []
            for _ in 0..<40 {
                switch rng.next() % 4 {
                case 0, 1:
                    let s = SessionID(rng.next() % 8) // 0 included: no value is taken to mean "none"
                    list.append(s)
                    model.append(s)
                case 2 where !model.isEmpty:
                    let i = Int(rng.next() % UInt64(model.count))
                    #expect(list.remove(at: i) == model.remove(at: i))
                default:
                    let v = SessionID(rng.next() % 8)
                    list.removeAll { $0 == v }
                    model.removeAll { $0 == v }
                }
                #expect(Array(list) == model)
                #expect(list.count == model.count && list.isEmpty == model.isEmpty)
                #expect(list == SessionList(model), "equal lists compare equal whatever their history")
            }
        }
    }

    @Test func literalsAndContains() {
        let list: SessionList = [SessionID(3), SessionID(0), SessionID(3)]
        #expect(list.count == 3 && list.contains(SessionID(0)) && !list.contains(SessionID(1)))
        #expect(list.firstIndex(of: SessionID(3)) == 0)
        #expect(list != [SessionID(3), SessionID(0)])
        #expect(SessionList().isEmpty && SessionList() == [])
    }
}
