public import Crypto
import Foundation
import HeraldCore

/// A compact JWT signed with ES256, as providers check the ones they are sent (APNs provider
/// tokens, VAPID): decoded, and its signature verified with the sender's public key.
public struct ES256Token {
    public let header: [String: Any]
    public let claims: [String: Any]

    /// - Returns: nil when `token` is not a JWT, is not ES256, or its signature does not verify.
    public init?(_ token: String, key: P256.Signing.PublicKey) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let headerJSON = Base64URL.decode(parts[0]), let claimsJSON = Base64URL.decode(parts[1]),
            let signatureData = Base64URL.decode(parts[2]),
            let header = (try? JSONSerialization.jsonObject(with: headerJSON)) as? [String: Any],
            let claims = (try? JSONSerialization.jsonObject(with: claimsJSON)) as? [String: Any],
            header["alg"] as? String == "ES256",
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData),
            key.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8))
        else { return nil }
        self.header = header
        self.claims = claims
    }
}
