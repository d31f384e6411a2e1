import ArgumentParser
import Engine
import Foundation
import Gateway
import Reactor
import Store

/// `roomcast apps` (OP-2): apps managed without SQL, on a data directory whether or not its node
/// runs. A running node applies a change within its poll interval (2 s).
struct AppsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apps",
        abstract: "List, add, rotate the secret of, disable, enable or remove apps (tenants).",
        discussion: """
            These act on the data directory's database, with its node stopped or running; a running node applies \
            the change within 2 s (it polls the store). The same is available on a running node through the \
            operator API (/v1/admin/apps, with --operator-token). A rotated secret stays valid for 24 h beside \
            the new one (signatures and client tokens made with either are accepted). A disabled app's calls are \
            refused (40311) and its WebSockets closed (4004) until it is enabled; its data is kept. A removed \
            app is deleted with all its data at once when no node runs, else when the node next starts. Apps \
            given with --app are set from the command line again at every start.
            """,
        subcommands: [List.self, Add.self, RotateSecret.self, Disable.self, Enable.self, Remove.self])

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the apps (keys, status, origin; secrets with --secrets).")
        @OptionGroup var data: DataDirectoryOption
        @Flag(help: "Also print each app's secret (this is how a lost secret is found again).")
        var secrets = false

        func run() throws {
            try data.withStore(migrate: false) { file in
                let (_, apps) = try file.operatorApps()
                let now = wallClockMilliseconds()
                if apps.isEmpty { print("no apps in \(data.dataDir)") }
                for app in apps {
                    var line = "\(app.key)  \(app.status.rawValue)  origin=\(app.origin)  created=\(StoreBackup.timestamp(app.createdAt))"
                    if let until = app.previousSecretExpiresAt, app.previousSecret(at: now) != nil {
                        line += "  previous secret valid until \(StoreBackup.timestamp(until)) UTC"
                    }
                    if secrets { line += "  secret=\(app.secret)" }
                    print(line)
                }
            }
        }
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add an app; prints its key and secret.")
        @Argument(help: "The app key: 1-64 of A-Z a-z 0-9 . _ -")
        var key: String
        @OptionGroup var data: DataDirectoryOption
        @Option(help: "The secret (16-128 visible ASCII characters); default: 48 random hex digits.")
        var secret: String?

        func run() throws {
            try data.withStore(create: true) { file in
                let app = try file.addApp(key: key, secret: secret ?? randomHex(24), now: wallClockMilliseconds())
                print("App-Key:    \(app.key)\nApp-Secret: \(app.secret)")
                printNodeNote(file)
            }
        }
    }

    struct RotateSecret: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rotate-secret",
                                                        abstract: "Give an app a new secret; the old one stays valid for 24 h.")
        @Argument(help: "The app key.")
        var key: String
        @OptionGroup var data: DataDirectoryOption
        @Option(help: "The new secret (16-128 visible ASCII characters); default: 48 random hex digits.")
        var secret: String?

        func run() throws {
            try data.withStore { file in
                let app = try file.rotateAppSecret(key: key, secret: secret ?? randomHex(24), now: wallClockMilliseconds(),
                                                   graceMilliseconds: OperationsConfiguration.secretGraceMilliseconds)
                print("App-Key:    \(app.key)\nApp-Secret: \(app.secret)")
                if let until = app.previousSecretExpiresAt { print("the previous secret stays valid until \(StoreBackup.timestamp(until)) UTC") }
                if app.origin == "config" { print("note: this app is given with --app; a node started with it sets that secret again") }
                printNodeNote(file)
            }
        }
    }

    struct Disable: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Refuse an app's calls and close its connections (its data is kept).")
        @Argument(help: "The app key.")
        var key: String
        @OptionGroup var data: DataDirectoryOption

        func run() throws { try setActive(key, false, data) }
    }

    struct Enable: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Serve a disabled app again.")
        @Argument(help: "The app key.")
        var key: String
        @OptionGroup var data: DataDirectoryOption

        func run() throws { try setActive(key, true, data) }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove an app and all its data (rooms, messages, webhooks, ...).")
        @Argument(help: "The app key.")
        var key: String
        @OptionGroup var data: DataDirectoryOption

        func run() throws {
            try data.withStore { file in
                switch try file.removeApp(key: key, nodeRunning: file.nodeRunning) {
                case .deleted: print("\(key): removed with all its data")
                case .atNextStart:
                    print("\(key): refused from now on; a node is running on \(data.dataDir), so its data is deleted when the node next starts")
                }
            }
        }
    }
}

extension DataDirectoryOption {
    /// Runs `body` on the directory's database, a refusal printed as `roomcast apps` prints it.
    func withStore(create: Bool = false, migrate: Bool = true, _ body: (StoreFile) throws -> Void) throws {
        try refusing { try body(try StoreFile(directory: dataDir, create: create, migrate: migrate)) }
    }
}

/// `apps disable` and `apps enable`.
private func setActive(_ key: String, _ active: Bool, _ data: DataDirectoryOption) throws {
    try data.withStore { file in
        let app = try file.setAppActive(key: key, active)
        print("\(app.key): \(app.status.rawValue)")
        printNodeNote(file)
    }
}

/// After a change: whether a running node takes it up.
private func printNodeNote(_ file: StoreFile) {
    if file.nodeRunning {
        print("a node is running on this data directory: it applies the change within \(OperationsConfiguration.defaultAppsPollMilliseconds / 1000) s")
    }
}
