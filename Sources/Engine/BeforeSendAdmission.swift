import Chat
import Replication
import Webhooks
import Wire

/// PX-4: commands held while a before-send hook judges a message, per issuing session (the
/// app server's messages under a key of their own each), so that a session's commands are
/// applied in the order they came: a later message waits for an earlier one's verdict, and so
/// does anything else the session asked for after it. At most `Limits.maxHeldPerSession`
/// per session (past it 42901); each message waits at most its app's timeout and
/// `Limits.beforeSendVerdictSlackMilliseconds` for a verdict.
struct Held {
    var command: Command
    var replyTo: ReplyTo
    var hook: BeforeSendSettings?
    var verdict: BeforeSendVerdict?
    var ticket: UInt64
    /// The hook was asked (a message held behind others is checked and asked in its turn).
    var asked: Bool
    /// The signed REST call the command comes from.
    var stamp: RequestStamp?
}
/// Whose commands a held queue keeps in order.
enum HoldKey: Hashable {
    case session(SessionID)
    case server(UInt64)
}

/// PX-4: messages of apps with a before-send hook are judged before they are appended to the log.
extension Engine {
    /// Takes a command over when a hook must judge it first, or when its session has commands
    /// held before it; false: apply it now.
    func admitThroughHook(_ command: Command, stamp: RequestStamp?, replyTo: ReplyTo) -> Bool {
        let session = ChatDomain.issuingSession(command)
        var hook: BeforeSendSettings?
        if let (app, sender) = command.messageSender, let settings = domain.appSettings(app)?.beforeSend {
            if case .session = sender { hook = settings } else if !settings.bypassServerMessages { hook = settings }
        }
        // Held: behind the session's held commands, or (a message to judge) behind its entries
        // still on their way through the cluster's log. Other commands keep their order in the log.
        let queued = session.map { held[.session($0)] != nil || (hook != nil && inFlight[$0] != nil) } ?? false
        guard hook != nil || queued else { return false }
        var disconnecting = false
        if case .disconnect = command { disconnecting = true }
        // A disconnect is never refused: the session must leave.
        if !disconnecting, let session, let q = held[.session(session)], q.count >= Limits.maxHeldPerSession {
            answer(ChatError(.rateLimited, "at most \(Limits.maxHeldPerSession) commands of a connection wait behind messages being moderated",
                             field: nil), replyTo: replyTo)
            return true
        }
        nextTicket &+= 1
        let ticket = nextTicket
        let key: HoldKey = session.map { .session($0) } ?? .server(ticket)
        guard let hook else {
            held[key, default: []].append(Held(command: command, replyTo: replyTo, hook: nil, verdict: nil, ticket: ticket, asked: false, stamp: stamp))
            return true
        }
        // What every send checks (membership, mutes, size) comes first: the hook sees only
        // messages that would be sent, and a refused one is answered at once. Behind held
        // commands the check may depend on them (a join held before it): a message that fails
        // it then waits, and is checked and judged when its turn comes.
        held[key, default: []].append(Held(command: command, replyTo: replyTo, hook: hook, verdict: nil, ticket: ticket, asked: false, stamp: stamp))
        if !ask(key, ticket: ticket, hook: hook, command: command, holdOnRefusal: queued) { drain(key) }
        return true
    }

    /// Checks a held message and asks the hook about it. A message the checks refuse is answered
    /// (and false returned) unless `holdOnRefusal`, when it stays held, not yet asked.
    func ask(_ key: HoldKey, ticket: UInt64, hook: BeforeSendSettings, command: Command, holdOnRefusal: Bool) -> Bool {
        guard let i = held[key]?.firstIndex(where: { $0.ticket == ticket }) else { return false }
        do {
            guard let subject = try domain.precheckSend(command, now: clock()) else { return false }
            held[key]![i].asked = true
            beforeSend?.check(subject, settings: hook) { [self] verdict in
                loop.execute { [self] in judged(key, ticket: ticket, verdict) }
            }
            // The engine's own deadline: a verdict that never comes cannot hold the session.
            let limit = hook.timeoutMilliseconds + Limits.beforeSendVerdictSlackMilliseconds
            _ = loop.schedule(after: .milliseconds(limit)) { [self] in
                judged(key, ticket: ticket, .failed("no verdict within \(limit) ms"))
            }
            return true
        } catch {
            if holdOnRefusal { return true }
            let h = held[key]!.remove(at: i)
            if held[key]!.isEmpty { held[key] = nil }
            answer(error, replyTo: h.replyTo)
            return false
        }
    }

    /// A verdict arrived (the first one counts: the engine's deadline or the hook's answer).
    func judged(_ key: HoldKey, ticket: UInt64, _ verdict: BeforeSendVerdict) {
        guard let i = held[key]?.firstIndex(where: { $0.ticket == ticket }), held[key]![i].verdict == nil else { return }
        held[key]![i].verdict = verdict
        drain(key)
    }

    /// Applies a session's held commands from the oldest while they are ready; a message that was
    /// held unasked is checked and sent to the hook when it comes first.
    func drain(_ key: HoldKey) {
        while let first = held[key]?.first {
            if let hook = first.hook, first.verdict == nil {
                if first.asked { return }
                if ask(key, ticket: first.ticket, hook: hook, command: first.command, holdOnRefusal: entriesInFlight(key)) { return }
                continue
            }
            held[key]!.removeFirst()
            if held[key]!.isEmpty { held[key] = nil }
            release(first)
        }
    }

    /// The session behind `key` has entries on their way through the cluster's log.
    func entriesInFlight(_ key: HoldKey) -> Bool {
        if case .session(let sid) = key { return inFlight[sid] != nil }
        return false
    }

    func release(_ h: Held) {
        guard isWritable else {
            owe(h.command)
            refuse(h.replyTo)
            return
        }
        var command = h.command
        if let hook = h.hook, let verdict = h.verdict {
            var outcome = verdict
            if case .replace(let content) = verdict, let (app, _) = command.messageSender {
                let limit = domain.appSettings(app)?.maxMessageBytes ?? Limits.defaultMaxMessageBytes
                if content.isEmpty || content.utf8.count > limit {
                    // The hook rejected the original: a replacement that cannot be sent drops it.
                    outcome = .drop(reason: "its replacement is empty or longer than maxMessageBytes (\(limit))")
                } else {
                    command = command.replacingContent(content)
                }
            }
            let unavailable = { (why: String) in
                ChatError(.moderationUnavailable, "the app's before-send hook gave no verdict (\(why)); nothing was sent; try again", field: "content")
            }
            switch outcome {
            case .pass, .replace:
                break
            case .drop(let reason):
                let message = reason.isEmpty ? "the app's moderation dropped the message" : "the app's moderation dropped the message: \(reason)"
                answer(ChatError(.messageRejected, message, field: "content"), replyTo: h.replyTo)
                return
            case .overloaded(let why):
                answer(ChatError(.rateLimited, why, field: nil), replyTo: h.replyTo)
                return
            case .unavailable(let why):
                answer(unavailable(why), replyTo: h.replyTo)
                return
            case .failed(let why):
                if !hook.failOpen {
                    answer(unavailable(why + "; the app fails closed"), replyTo: h.replyTo)
                    return
                }
                logger.debug("before-send hook failed; the app fails open", metadata: ["why": "\(why)"])
            }
        }
        perform(command, stamp: h.stamp, replyTo: h.replyTo)
    }
}
