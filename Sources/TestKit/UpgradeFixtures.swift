import Foundation

/// OP-3: the data directories earlier builds made (`scripts/make-upgrade-fixture.sh COMMIT`),
/// committed under `Tests/Fixtures/upgrade/COMMIT/`: each a database and the manifest of the
/// scenario that build was driven through.
public struct UpgradeFixture: Sendable {
    public struct Manifest: Decodable, Sendable {
        public struct App: Decodable, Sendable {
            public var key: String
            public var secret: String
        }
        public struct Role: Decodable, Sendable {
            public var room: String
            public var user: String
            public var role: String
        }
        public struct Message: Decodable, Sendable {
            public var room: String
            public var sender: String
            public var content: String
        }
        public struct Mute: Decodable, Sendable {
            public var room: String?
            public var user: String
            public var minutes: Int?
        }
        public var commit: String
        public var commitDate: String
        public var madeBy: String
        public var migrations: [String]
        public var app: App
        public var rooms: [String: String]
        public var roles: [Role]
        public var messages: [Message]
        public var permanentMutes: [Mute]
        public var temporaryMutes: [Mute]
        public var globalMutes: [Mute]
        public var webhookEndpoints: [String]
    }

    public let directory: String
    public let manifest: Manifest
    public var database: String { directory + "/roomcast.sqlite" }
}

public enum UpgradeFixtures {
    public static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Tests/Fixtures/upgrade").path

    /// Every fixture, oldest commit first.
    public static var all: [UpgradeFixture] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.compactMap { name -> UpgradeFixture? in
            let dir = directory + "/" + name
            guard let data = FileManager.default.contents(atPath: dir + "/manifest.json"),
                  let manifest = try? JSONDecoder().decode(UpgradeFixture.Manifest.self, from: data) else { return nil }
            return UpgradeFixture(directory: dir, manifest: manifest)
        }.sorted { $0.manifest.commitDate < $1.manifest.commitDate }
    }
}
