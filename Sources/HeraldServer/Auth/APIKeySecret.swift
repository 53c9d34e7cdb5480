import Crypto
import Foundation
import HeraldCore

/// API key secrets: `hk_` followed by 48 hex characters (192 random bits). Only a SHA-256
/// hash is stored; a high-entropy secret needs no slow hash, and lookups stay one index probe.
public enum APIKeySecret {
    public static let prefix = "hk_"

    public static func generate() -> String {
        var rng = SystemRandomNumberGenerator()
        let bytes = (0..<24).map { _ in UInt8.random(in: 0...255, using: &rng) }
        return prefix + Hex.lowercase(bytes)
    }

    public static func hash(_ secret: String) -> String {
        Hex.lowercase(SHA256.hash(data: Data(secret.utf8)))
    }
}
