import ArgumentParser
import Foundation
import Gateway
import Store
#if canImport(Glibc)
import Glibc
#endif

/// What the operator subcommands share: the data directory option and how a refusal ends the
/// command (`error CODE: message` on standard error, exit status 1, nothing changed).
struct DataDirectoryOption: ParsableArguments {
    @Option(help: "Directory of the node's data: its SQLite database, and its backups by default [ROOMCAST_DATA_DIR].")
    var dataDir: String = environment("ROOMCAST_DATA_DIR") ?? "./roomcast-data"
}

/// Runs an operator action; a refusal is printed with its error-table code and exits 1.
func refusing(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let e as ExitCode {
        throw e
    } catch {
        let refusal = OperatorRefusal.from(error)
        FileHandle.standardError.write(Data("roomcast: \(refusal)\n".utf8))
        throw ExitCode(1)
    }
}

/// Whether standard error is a terminal (progress is shown only there).
var standardErrorIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

/// A byte count for people.
func humanBytes(_ n: Int64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(n)
    var unit = 0
    while value >= 1024 && unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    return unit == 0 ? "\(n) B" : String(format: "%.1f %@", value, units[unit])
}
