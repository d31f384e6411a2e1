import Crypto
import Foundation
import HTTP1

/// Standard Webhooks signing (WH-3): `webhook-signature: v1,<base64 HMAC-SHA256(key, "id.timestamp.body")>`,
/// with one signature per active secret (two during a rotation), space-separated.
public enum StandardWebhooks {
    public static let secretPrefix = "whsec_"

    /// A new `whsec_` secret from 24 random bytes.
    public static func makeSecret(_ random: () -> UInt8) -> String {
        secretPrefix + Data((0..<24).map { _ in random() }).base64EncodedString()
    }

    /// The HMAC key of a secret: the base64 after `whsec_` (the prefix is optional).
    public static func key(_ secret: String) -> [UInt8]? {
        let b64 = secret.hasPrefix(secretPrefix) ? String(secret.dropFirst(secretPrefix.count)) : secret
        guard let data = Data(base64Encoded: b64), !data.isEmpty else { return nil }
        return Array(data)
    }

    public static func isValidSecret(_ secret: String) -> Bool {
        guard let k = key(secret) else { return false }
        return k.count >= 16 && k.count <= 64
    }

    public static func signature(id: String, timestamp: Int64, body: [UInt8], secrets: [String]) -> String {
        var signed = Array("\(id).\(timestamp).".utf8)
        signed += body
        return secrets.compactMap { secret -> String? in
            guard let k = key(secret) else { return nil }
            let mac = HMAC<SHA256>.authenticationCode(for: signed, using: SymmetricKey(data: k))
            return "v1," + Data(mac).base64EncodedString()
        }.joined(separator: " ")
    }
}

/// RongCloud callback signing: `?appKey=&timestamp=&nonce=&signature=hex(SHA1(appSecret + nonce + timestamp))`.
public enum RongCloudCallback {
    public static func query(appKey: String, appSecret: String, nonce: String, timestamp: Int64) -> String {
        let sig = hex(Insecure.SHA1.hash(data: Array((appSecret + nonce + String(timestamp)).utf8)))
        return "appKey=\(percentEncode(appKey))&timestamp=\(timestamp)&nonce=\(percentEncode(nonce))&signature=\(sig)"
    }

    static func percentEncode(_ s: String) -> String {
        s.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? s
    }
}

/// NIM copy ("抄送") signing: `MD5` = hex MD5 of the body, `CheckSum` = hex SHA1(appSecret + MD5 + CurTime), CurTime in ms.
public enum NIMCallback {
    public static func headers(appKey: String, appSecret: String, body: [UInt8], curTime: Int64) -> [(String, String)] {
        let md5 = hex(Insecure.MD5.hash(data: body))
        let checkSum = hex(Insecure.SHA1.hash(data: Array((appSecret + md5 + String(curTime)).utf8)))
        return [("AppKey", appKey), ("CurTime", String(curTime)), ("MD5", md5), ("CheckSum", checkSum)]
    }
}

func hex<D: Sequence>(_ digest: D) -> String where D.Element == UInt8 { hexEncoded(digest) }
