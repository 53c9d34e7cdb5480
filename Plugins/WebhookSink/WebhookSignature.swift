import Crypto
public import Foundation

/// Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`.
///
/// A secret written `whsec_<base64>` is the base64-decoded key, as the convention specifies;
/// any other secret is used as its UTF-8 bytes.
public struct WebhookSignature: Sendable {
    let key: SymmetricKey

    /// A signer with the receiver's shared secret.
    public init(secret: String) {
        if secret.hasPrefix("whsec_"), let bytes = Data(base64Encoded: String(secret.dropFirst(6))) {
            key = SymmetricKey(data: bytes)
        } else {
            key = SymmetricKey(data: Data(secret.utf8))
        }
    }

    /// The `webhook-signature` header value for one message.
    public func sign(id: String, timestamp: Int, body: Data) -> String {
        var signed = Data("\(id).\(timestamp).".utf8)
        signed.append(body)
        return "v1," + Data(HMAC<SHA256>.authenticationCode(for: signed, using: key)).base64EncodedString()
    }

    /// A stable message id part for `text`: the first 16 bytes of its SHA-256, in hex.
    static func digest(_ text: String) -> String {
        SHA256.hash(data: Data(text.utf8)).prefix(16).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}
