public import Foundation

/// Base64url without padding (RFC 4648 §5), the encoding Web Push keys and VAPID use.
public enum Base64URL {
    /// `data` in base64url, without padding.
    public static func encode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Accepts padded or unpadded input, and standard base64's `+` and `/` as well.
    public static func decode(_ text: String) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard base64.utf8.allSatisfy({ $0 != 0x3D }) || base64.hasSuffix("=") else { return nil }
        base64 = base64.replacingOccurrences(of: "=", with: "")
        let remainder = base64.utf8.count % 4
        guard remainder != 1 else { return nil }
        if remainder > 0 { base64 += String(repeating: "=", count: 4 - remainder) }
        return Data(base64Encoded: base64)
    }
}
