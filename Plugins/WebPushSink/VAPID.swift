public import Crypto
public import Foundation
import HeraldCore
import JWTKit

/// An application server's VAPID key (RFC 8292): an ECDSA P-256 key pair whose public half the
/// web app passes to `pushManager.subscribe`, and whose private half signs every push request.
public struct VAPIDKey: Sendable {
    /// The application server's P-256 key: browsers' subscriptions are made for its public half.
    public let privateKey: P256.Signing.PrivateKey

    /// A key from its private half.
    public init(privateKey: P256.Signing.PrivateKey) {
        self.privateKey = privateKey
    }

    /// The private key as `herald vapid generate` prints it: 32 bytes, base64url.
    public init(base64URL text: String) throws {
        guard let raw = Base64URL.decode(text.trimmingCharacters(in: .whitespacesAndNewlines)), raw.count == 32 else {
            throw VAPIDError.invalidKey("must be 32 bytes of base64url (herald vapid generate prints one)")
        }
        do {
            privateKey = try P256.Signing.PrivateKey(rawRepresentation: raw)
        } catch {
            throw VAPIDError.invalidKey("is not a P-256 private key")
        }
    }

    /// A new random key (`herald vapid generate`).
    public static func generate() -> VAPIDKey { VAPIDKey(privateKey: P256.Signing.PrivateKey()) }

    /// The private half as configured (`vapid_private_key`).
    public var privateKeyBase64URL: String { Base64URL.encode(privateKey.rawRepresentation) }
    /// The application server key for `applicationServerKey` and the `k=` parameter.
    public var publicKeyBase64URL: String { Base64URL.encode(privateKey.publicKey.x963Representation) }

    struct Claims: JWTPayload {
        var aud: String
        var exp: Int
        var sub: String
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// `vapid t=<JWT>, k=<public key>` for a request to `endpoint`: `aud` is the endpoint's
    /// origin, `exp` 12 hours ahead (RFC 8292 allows at most 24), `sub` the operator's contact.
    public func authorization(for endpoint: URL, subject: String, now: Date = Date()) async throws -> String {
        guard let origin = Self.origin(of: endpoint) else { throw VAPIDError.invalidEndpoint(endpoint.absoluteString) }
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PrivateKey(backing: privateKey))
        let token = try await keys.sign(Claims(aud: origin, exp: Int(now.timeIntervalSince1970) + 12 * 3600, sub: subject))
        return "vapid t=\(token), k=\(publicKeyBase64URL)"
    }

    /// `scheme://host[:port]` of a URL.
    public static func origin(of url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host else { return nil }
        let port = url.port.map { $0 == defaultPort(scheme: scheme) ? "" : ":\($0)" } ?? ""
        return "\(scheme)://\(host)\(port)"
    }

    /// The port a URL of `scheme` names when it names none.
    static func defaultPort(scheme: String) -> Int {
        scheme.lowercased() == "https" ? 443 : 80
    }
}

/// Why a configured VAPID key or subject was refused.
public enum VAPIDError: Error, Equatable, CustomStringConvertible {
    /// The private key is not 32 bytes of base64url naming a P-256 key; the text says which.
    case invalidKey(String)
    /// A subscription's endpoint has no origin the JWT's audience can name; the text is the endpoint.
    case invalidEndpoint(String)

    public var description: String {
        switch self {
        case .invalidKey(let problem): "the VAPID private key \(problem)"
        case .invalidEndpoint(let endpoint): "'\(endpoint)' has no origin"
        }
    }
}
