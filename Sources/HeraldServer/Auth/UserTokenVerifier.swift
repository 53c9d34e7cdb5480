import Foundation
import HeraldCore
import HeraldHTTP
public import JWTKit

/// The claims of a user token: `sub` is the user id, `exp` must be in the future and `nbf`,
/// when given, in the past (RFC 7519 §4.1.5: a token is not accepted before it). `iat` says when
/// it was issued: a token issued before its user's tokens were ended (an erasure, a sign-out) is
/// refused, and so is one without `iat` once that happened (docs/security.md). Tokens Herald
/// mints for a device (`POST /api/auth/device`) say so in `kind` and name the device.
public struct UserTokenClaims: JWTPayload {
    public var sub: SubjectClaim
    public var exp: ExpirationClaim
    public var nbf: NotBeforeClaim?
    public var iat: IssuedAtClaim?
    /// ``UserToken/Kind/device`` for the tokens Herald mints; absent in a backend's.
    public var kind: String?
    /// The device a device token was issued to.
    public var deviceID: String?

    enum CodingKeys: String, CodingKey {
        case sub, exp, nbf, iat, kind
        case deviceID = "device_id"
    }

    public init(sub: String, exp: Date, iat: Date, kind: UserToken.Kind = .backend, deviceID: String? = nil) {
        self.sub = SubjectClaim(value: sub)
        self.exp = ExpirationClaim(value: exp)
        // Whole seconds, as `exp` (see ``UserTokenVerifier/init(secret:)``), rounded down: a
        // token is never dated after it was made, so an ending at the same instant takes it.
        self.iat = IssuedAtClaim(value: Date(timeIntervalSince1970: iat.timeIntervalSince1970.rounded(.down)))
        self.kind = kind == .device ? UserToken.Kind.device.rawValue : nil
        self.deviceID = deviceID
    }

    public func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp.verifyNotExpired()
        try nbf?.verifyNotBefore()
    }
}

/// Verifies HS256 user tokens minted by a backend with `user_token_secret`.
public struct UserTokenVerifier: Sendable {
    /// HS256 needs a key at least as long as its 32-byte digest.
    public static let minimumSecretBytes = 32

    private let keys: JWTKeyCollection

    public init(secret: String) async {
        keys = JWTKeyCollection()
        // Signed tokens carry `exp` in whole seconds, rounded down so a token never outlives
        // the expiry asked for: RFC 7519 allows a fraction, but JWT libraries that read a
        // NumericDate as an integer refuse `1795801691.0843167`. Tokens read may have one.
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .integerSecondsSince1970
        await keys.add(
            hmac: HMACKey(from: secret), digestAlgorithm: .sha256, parser: CriticalExtensionRefusingParser(),
            serializer: DefaultJWTSerializer(jsonEncoder: encoder))
    }

    /// - Returns: the token's user, kind and times.
    /// - Throws: a 401 ``HeraldError`` for a forged, malformed or expired token.
    public func verify(_ token: String) async throws -> UserToken {
        let claims: UserTokenClaims
        do {
            claims = try await keys.verify(token, as: UserTokenClaims.self)
        } catch is CriticalExtensionRefusingParser.Refused {
            throw HeraldError(.unauthorized, code: "invalid_token", "the user token is not valid (crit)")
        } catch let error as JWTError where error.errorType == .claimVerificationFailure {
            if error.failedClaim is NotBeforeClaim { throw HeraldError(.unauthorized, code: "invalid_token", "the user token is not valid yet (nbf)") }
            throw HeraldError(.unauthorized, code: "token_expired", "the user token has expired")
        } catch {
            throw HeraldError(.unauthorized, code: "invalid_token", "the user token is not valid")
        }
        // The token is what is wrong, not the request: its issuer named no user Herald can store.
        do {
            try UserID.validate(claims.sub.value, field: "sub")
        } catch let error as HeraldError {
            throw HeraldError(.unauthorized, code: "invalid_token", "the user token is not valid: \(error.message)")
        }
        let kind: UserToken.Kind
        switch claims.kind {
        case nil: kind = .backend
        case UserToken.Kind.device.rawValue?: kind = .device
        case let other?:
            throw HeraldError(.unauthorized, code: "invalid_token", "the user token is not valid: unknown kind '\(other.prefix(32))'")
        }
        return UserToken(userID: claims.sub.value, kind: kind, issuedAt: claims.iat?.value, expires: claims.exp.value, deviceID: claims.deviceID)
    }

    /// RFC 7515 §4.1.11: a token naming extensions its reader must understand (`crit`) is
    /// refused, as Herald understands none. The signer hands a custom parser the whole token
    /// once its signature is verified, so the header is read in the same pass as the claims
    /// (checking it afterwards parsed every token twice, on every pull a user token makes).
    struct CriticalExtensionRefusingParser: JWTParser {
        struct Refused: Error {}

        var jsonDecoder: any JWTJSONDecoder = .defaultForJWT

        func parse<Payload: JWTPayload>(_ token: some DataProtocol, as type: Payload.Type) throws -> (header: JWTHeader, payload: Payload, signature: Data) {
            let parsed = try DefaultJWTParser(jsonDecoder: jsonDecoder).parse(token, as: type)
            guard parsed.header.crit == nil else { throw Refused() }
            return parsed
        }
    }

    /// Signs a backend's token, issued now; for `herald user-token`, tests and backends that
    /// embed Herald's library.
    public func sign(userID: String, expires: Date, issued: Date = Date()) async throws -> String {
        try await keys.sign(UserTokenClaims(sub: userID, exp: expires, iat: issued))
    }

    /// Signs a device token: what `POST /api/auth/device` answers.
    public func signDevice(userID: String, deviceID: String, expires: Date, issued: Date = Date()) async throws -> String {
        try await keys.sign(UserTokenClaims(sub: userID, exp: expires, iat: issued, kind: .device, deviceID: deviceID))
    }
}
