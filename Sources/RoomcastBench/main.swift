import ArgumentParser
import Reactor

/// roomcast-bench: load generator built on Roomcast's own Reactor, HTTP1 and WebSocket code, so it
/// is fast enough to measure the server, and can measure any peer that speaks HTTP/WebSocket.
struct Bench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "roomcast-bench",
        abstract: "Load generator for Roomcast and its peers.",
        subcommands: [IdleCommand.self, FanoutCommand.self, WritesCommand.self, OverloadCommand.self, JoinstormCommand.self])
}

func seconds(_ d: Duration) -> Double {
    Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
}

Bench.main()

/// `x` with `digits` decimals (no Foundation).
func fixed(_ x: Double, _ digits: Int) -> String {
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let v = (x * scale).rounded() / scale
    var s = "\(v)"
    if let dot = s.firstIndex(of: ".") {
        let decimals = s.distance(from: dot, to: s.endIndex) - 1
        if decimals < digits { s += String(repeating: "0", count: digits - decimals) }
    } else if digits > 0 {
        s += "." + String(repeating: "0", count: digits)
    }
    return s
}
