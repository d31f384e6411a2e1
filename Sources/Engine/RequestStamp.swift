import Chat
import Synchronization
import Replication

/// Cluster mode (CLUSTER.md "Nonces and idempotency keys"): what one signed REST call carries
/// into the shared log, and what the log said about it. The first change the call appends
/// carries its nonce and, with an `Idempotency-Key`, its claim on the key; a call that appends
/// no change sends its nonce in a record of its own once it is answered (`Engine.finish`).
/// Shared by the I/O loop answering the call and the engine thread; its state is behind a mutex.
public final class RequestStamp: Sendable {
    public let nonce: RequestNonce
    /// The header the nonce came in (a refusal names it, as the single node's does).
    public let nonceField: String
    /// Unique in this process (with the node run's incarnation, in the whole cluster's log).
    public let serial: UInt64

    /// What the log decided for the call's first change.
    public enum Refusal: Equatable, Sendable {
        case nonceReused
        case duplicate(RequestLedger.Duplicate)
    }

    public struct Key: Sendable, Equatable {
        public let key: String
        public let fingerprint: String
        /// `Idempotency-Key` or `X-Request-ID`.
        public let header: String
    }

    struct State {
        var key: Key?
        /// The nonce went into the log (with a change, or in a record of its own).
        var nonceSent = false
        /// The key's claim went into the log with a change.
        var keySent = false
        /// The claiming change was applied: the key is this call's.
        var admitted = false
        var refusal: Refusal?
    }

    private let state = Mutex(State())
    private static let serials = Atomic<UInt64>(0)

    public init(nonce: RequestNonce, nonceField: String) {
        self.nonce = nonce
        self.nonceField = nonceField
        serial = Self.serials.add(1, ordering: .relaxed).newValue
    }

    /// PX-2: the call was sent with an idempotency key (set before its first change).
    public func setKey(_ key: String, fingerprint: String, header: String) {
        state.withLock { $0.key = Key(key: key, fingerprint: fingerprint, header: header) }
    }

    public var key: Key? { state.withLock { $0.key } }
    /// What the log refused the call's first change for, if it did.
    public var refusal: Refusal? { state.withLock { $0.refusal } }

    /// For the change about to be appended: the nonce and key claim it carries (the first change
    /// only; nil for the rest).
    func takeForChange(incarnation: UInt64) -> (nonce: RequestNonce, key: IdempotencyClaim?)? {
        state.withLock { s in
            guard !s.nonceSent else { return nil }
            s.nonceSent = true
            s.keySent = s.key != nil
            let claim = s.key.map { IdempotencyClaim(app: nonce.app, key: $0.key, fingerprint: $0.fingerprint,
                                                     claim: ClaimID(incarnation: incarnation, serial: serial)) }
            return (nonce, claim)
        }
    }

    /// The change that took the nonce and key was not appended (refused before the log): the
    /// next change, or the call's own nonce record, carries them.
    func giveBack() {
        state.withLock { s in
            s.nonceSent = false
            s.keySent = false
        }
    }

    /// The change that carried the nonce may or may not be in the log: the call's nonce record
    /// sends it again; its key's claim stays sent.
    func resendNonce() { state.withLock { $0.nonceSent = false } }

    /// For the call's end: true if its nonce has not gone into the log yet (and now goes alone).
    func takeNonceAlone() -> Bool {
        state.withLock { s in
            guard !s.nonceSent else { return false }
            s.nonceSent = true
            return true
        }
    }

    func admitted() { state.withLock { $0.admitted = true } }
    func refused(_ r: Refusal) { state.withLock { $0.refusal = r } }

    /// Whether the key's claim went with a change, and whether that change was applied as the
    /// key's (for what an answer that is not kept must tell the log).
    var claimState: (sent: Bool, admitted: Bool) { state.withLock { ($0.keySent, $0.admitted) } }

    func ref(incarnation: UInt64) -> KeyRef? {
        key.map { KeyRef(app: nonce.app, key: $0.key, claim: ClaimID(incarnation: incarnation, serial: serial)) }
    }
}
