/// Every refusal of the domain: a stable code (from `ErrorCode`, the one table of codes the docs
/// print), a message, and the field it is about.
public struct ChatError: Error, Equatable, Sendable, CustomStringConvertible {
    public let code: ErrorCode
    public let message: String
    /// The request field the error is about, when there is one.
    public let field: String?

    public init(_ code: ErrorCode, _ message: String, field: String? = nil) {
        self.code = code
        self.message = message
        self.field = field
    }

    public var description: String {
        field.map { "\(code.rawValue) \($0): \(message)" } ?? "\(code.rawValue): \(message)"
    }

    static func invalid(_ field: String, _ message: String) -> ChatError {
        ChatError(.invalidParameter, message, field: field)
    }

    /// NIM-3: the one refusal of every change an anonymous session asks for (messages, attributes,
    /// queue, own profile, management, room updates and creation, conversation status).
    static func anonymousReadOnly() -> ChatError {
        ChatError(.anonymousReadOnly, "anonymous members receive but cannot send or change anything", field: "session")
    }
}
