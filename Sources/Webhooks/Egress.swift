import Foundation

/// Where a webhook may connect (WH-5). A tenant's endpoint must not reach the host's own services,
/// its network or a cloud metadata service unless the operator allows private targets (for its app,
/// or for an endpoint of the command line) and the endpoint asks for them.
/// The check runs on the address curl is about to connect to (after DNS), so a name that resolves
/// to a private address is refused too.
public enum AddressClass: String, Equatable, Sendable {
    case global
    case loopback
    /// RFC 1918, RFC 6598 shared space, IPv6 unique local (fc00::/7, includes fd00:ec2::254).
    case privateNetwork
    /// 169.254/16 (includes the 169.254.169.254 metadata service) and fe80::/10.
    case linkLocal
    /// 0.0.0.0/8 and :: (Linux connects those to the host itself).
    case unspecified
    case multicast
    /// Documentation, benchmarking, IETF-reserved and other special-purpose ranges.
    case reserved
}

public enum EgressPolicy {
    /// Global addresses always; the others only with `allowPrivate` (never multicast).
    public static func allows(_ c: AddressClass, allowPrivate: Bool) -> Bool {
        switch c {
        case .global: return true
        case .multicast: return false
        default: return allowPrivate
        }
    }

    /// An IPv4 address in host byte order (a.b.c.d = a<<24 | b<<16 | c<<8 | d).
    public static func classify(ipv4 a: UInt32) -> AddressClass {
        func within(_ base: UInt32, _ bits: UInt32) -> Bool { bits == 0 || (a >> (32 - bits)) == (base >> (32 - bits)) }
        if within(0x0000_0000, 8) { return .unspecified }
        if within(0x7F00_0000, 8) { return .loopback }
        if within(0x0A00_0000, 8) || within(0xAC10_0000, 12) || within(0xC0A8_0000, 16) || within(0x6440_0000, 10) { return .privateNetwork }
        if within(0xA9FE_0000, 16) { return .linkLocal }
        if within(0xE000_0000, 4) { return .multicast }
        if within(0xF000_0000, 4) || within(0xC000_0000, 24) || within(0xC000_0200, 24) || within(0xC612_0000, 15)
            || within(0xC633_6400, 24) || within(0xCB00_7100, 24) {
            return .reserved
        }
        return .global
    }

    /// An IPv6 address (16 bytes). IPv4-mapped and NAT64 addresses are judged by their IPv4 part.
    public static func classify(ipv6 b: [UInt8]) -> AddressClass {
        guard b.count == 16 else { return .reserved }
        let v4 = UInt32(b[12]) << 24 | UInt32(b[13]) << 16 | UInt32(b[14]) << 8 | UInt32(b[15])
        if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xFF && b[11] == 0xFF { return classify(ipv4: v4) }
        if b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xFF && b[3] == 0x9B && b[4..<12].allSatisfy({ $0 == 0 }) { return classify(ipv4: v4) }
        if b[0..<15].allSatisfy({ $0 == 0 }) { return b[15] == 1 ? .loopback : (b[15] == 0 ? .unspecified : .reserved) }
        if b[0..<12].allSatisfy({ $0 == 0 }) { return .reserved }  // IPv4-compatible (deprecated)
        if b[0] & 0xFE == 0xFC { return .privateNetwork }
        if b[0] == 0xFE && b[1] & 0xC0 == 0x80 { return .linkLocal }
        if b[0] == 0xFF { return .multicast }
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0D && b[3] == 0xB8 { return .reserved }
        if b[0] == 0x01 && b[1..<8].allSatisfy({ $0 == 0 }) { return .reserved }  // 100::/64 discard
        return .global
    }

    /// The class of an IP literal (`10.0.0.1`, `::1`, `[::1]`), or nil for a name.
    public static func classify(literal host: String) -> AddressClass? {
        var h = host
        if h.hasPrefix("[") && h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        var v4 = in_addr()
        if inet_pton(AF_INET, h, &v4) == 1 { return classify(ipv4: UInt32(bigEndian: v4.s_addr)) }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, h, &v6) == 1 {
            let bytes = withUnsafeBytes(of: &v6) { Array($0) }
            return classify(ipv6: bytes)
        }
        return nil
    }
}

/// A validated webhook URL: http or https, a host, no credentials.
public struct WebhookURL: Equatable, Sendable {
    public let string: String
    public let host: String

    public enum Problem: Error, Equatable, CustomStringConvertible {
        case malformed
        case scheme
        case credentials
        case privateTarget(AddressClass)

        public var description: String {
            switch self {
            case .malformed: return "url must be an absolute http or https URL with a host (at most 2048 bytes)"
            case .scheme: return "url must use http or https"
            case .credentials: return "url must not carry a user name or password"
            case .privateTarget(let c):
                return "url points at a \(c.rawValue) address; only endpoints the operator allows (--webhook-allow-private) "
                    + "with allowPrivateNetwork set may reach it"
            }
        }
    }

    public init(_ s: String, allowPrivate: Bool) throws(Problem) {
        guard s.utf8.count <= 2048, let c = URLComponents(string: s), let host = c.host, !host.isEmpty else { throw .malformed }
        guard let scheme = c.scheme?.lowercased(), scheme == "http" || scheme == "https" else { throw .scheme }
        guard c.user == nil && c.password == nil else { throw .credentials }
        if let port = c.port, port < 1 || port > 65535 { throw .malformed }
        if let cls = EgressPolicy.classify(literal: host), !EgressPolicy.allows(cls, allowPrivate: allowPrivate) {
            throw .privateTarget(cls)
        }
        string = s
        self.host = host
    }
}
