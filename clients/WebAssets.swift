import Foundation

/// The browser side (BX-3, BX-4), shipped inside the build as resources: the client library
/// (`roomcast.js`, `roomcast.d.ts`) and the console (`console/`). The gateway serves them from
/// here unless `--assets-dir` points at a checkout's `clients/` (to work on them without a rebuild).
public enum WebAssets {
    static let bundleName = "Roomcast_WebAssets.resources"

    /// The directory holding the files: the resource bundle next to the executable (where
    /// `swift build` puts it, and where an installation must copy it), else this checkout's
    /// `clients/`; nil when neither is there (the gateway then serves no console, and says so).
    /// Unlike SwiftPM's generated `Bundle.module`, a missing bundle is not a crash.
    public static var directory: String? {
        var candidates = [Bundle.main.bundlePath + "/" + bundleName]
        if let executable = Bundle.main.executableURL?.resolvingSymlinksInPath() {
            candidates.append(executable.deletingLastPathComponent().path + "/" + bundleName)
        }
        candidates.append(URL(fileURLWithPath: #filePath).deletingLastPathComponent().path)
        return candidates.first { FileManager.default.fileExists(atPath: $0 + "/console/index.html") }
    }
}
