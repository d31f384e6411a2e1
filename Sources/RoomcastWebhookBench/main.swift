import ArgumentParser
import Reactor

/// roomcast-webhook-bench: the webhook delivery benchmark (WH-6), which needs the outbox and the
/// libcurl delivery thread, and the receiver it delivers to. Kept apart from `roomcast-bench`,
/// which depends only on the wire layers and can measure any server.
struct WebhookBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "roomcast-webhook-bench",
        abstract: "Webhook delivery benchmark: a receiver, and N signed webhooks through the durable outbox.",
        subcommands: [WebhooksCommand.self, ReceiveCommand.self])
}

WebhookBench.main()

func seconds(_ d: Duration) -> Double {
    Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
}
