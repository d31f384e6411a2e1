import Testing
@testable import Chat

/// MO-4 (ultra-group rename) in the domain: the new name is kept and told to webhooks; bad names
/// and unknown groups change nothing.
@Suite struct GroupRenameTests {
    @Test("MO-4: an ultra group is renamed; webhooks are told; bad input names its field and changes nothing")
    func rename() {
        let h = Harness()
        #expect(h.run(.createGroup(app: h.app, groupId: "g", name: "Old", creator: "owner")).succeeded)
        let out = h.run(.renameGroup(app: h.app, groupId: "g", name: "新名字"))
        guard case .success(.group(let info)) = out.reply else { Issue.record("not renamed: \(String(describing: out.error))"); return }
        #expect(info.name == "新名字")
        #expect(out.webhooks.map(\.type) == [.channelChanged] && out.webhooks.first?.details["change"] == "groupRenamed")
        #expect(out.mutations.count == 1)
        for (name, field) in [("", "name"), (String(repeating: "n", count: Limits.maxNameBytes + 1), "name")] {
            let bad = h.run(.renameGroup(app: h.app, groupId: "g", name: name))
            #expect(bad.error?.code == .invalidParameter && bad.error?.field == field)
            #expect(bad.mutations.isEmpty && bad.webhooks.isEmpty)
        }
        #expect(h.run(.renameGroup(app: h.app, groupId: "missing", name: "x")).error?.code == .notFound)
        guard case .group(let after)? = h.query(.group(app: h.app, groupId: "g")) else { Issue.record("no group"); return }
        #expect(after.name == "新名字")
        // The same name again changes nothing.
        #expect(h.run(.renameGroup(app: h.app, groupId: "g", name: "新名字")).mutations.isEmpty)
    }
}
