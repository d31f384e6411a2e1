import TestKit

/// Runs roomcast with `options` (on port 0, in a fresh data directory) and returns how it ended and
/// what it printed: an option it refuses ends it at once, before it listens.
func roomcastRun(_ options: [String], environment: [String: String] = [:], timeout: Double = 20) throws -> (status: Int32?, log: String) {
    let p = try RunningProcess(path: try productPath("roomcast"), arguments: ["--port", "0", "--data-dir", temporaryDirectory("roomcast-options")] + options,
                               environment: environment)
    return p.finish(timeout: timeout)
}
