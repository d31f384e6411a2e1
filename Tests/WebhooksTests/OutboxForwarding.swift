import Chat
import Store
import Webhooks

// Deliberately no `import GRDB` here: this is all the engine does with the webhook outbox, and it
// must compile without knowing the store's database library (SPEC §9, WH-4).

/// The commit of one outcome: its mutations and, in the same transaction, its webhook messages.
func outcomeCommit(_ webhooks: WebhookService, mutations: [Mutation], records: [WebhookRecord],
                   onDurable: @escaping @Sendable (WebhookService.Staged?) -> Void) -> Store.Commit {
    let staged = webhooks.stage(records)
    return Store.Commit(mutations: mutations, extra: staged.map(WebhookService.persist), onDurable: { onDurable(staged) })
}
