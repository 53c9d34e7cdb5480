import Crypto
import Foundation
import HeraldCards
import HeraldCore
import HeraldHTTP
import HeraldStore
import Hummingbird

/// `POST /api/auth/device` (docs/security.md, "User and device tokens"): an app's device gets a
/// device token. With a backend's `proof` (a user token for `user_id`) it acts for that user, and
/// lives no longer than the proof; a device token is never a proof, so no token can be renewed
/// into a longer-lived one without the backend. Without a proof, when `auth.device_sign_up` is
/// on, a device gets an anonymous user derived from its `device_id`, guarded by a device secret
/// returned once at its first sign-up and required at every later one.
struct DeviceAuthRoutes {
    let store: any UserCredentialStore
    /// A token's answer carries the user's card cache key (docs/cards.md).
    let cards: any CardStore
    let userTokens: UserTokenVerifier?
    let endedTokens: EndedTokens
    let signUp: Bool
    let limiter: SignUpLimiter
    /// Failed proofs and device secrets count with failed credentials (``AuthMiddleware``).
    let failures: FailedAuthLimiter
    /// Whose `X-Forwarded-For` names the client the limiter counts.
    let proxies: TrustedProxies
    let tokenLifetime: Duration
    /// Until when an anonymous user that existed before device secrets (and so has none) may be
    /// claimed by the first device that signs in for it; nil: from the upgrade, ``claimWindow``.
    let secretClaimUntil: Date?

    /// Anonymous device ids shorter than this are refused: an id is the account's name, and a
    /// short one is guessed.
    static let minimumAnonymousDeviceID = 16
    /// How long after the upgrade that added device secrets an existing anonymous user may be
    /// claimed, unless `auth.device_secret_claim_until` says otherwise.
    static let claimWindow: TimeInterval = 30 * 86_400

    func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .post, "/api/auth/device", authenticate)
    }

    /// `dev_` and 32 hex digits of the device id's SHA-256: the same device always gets the same user.
    static func anonymousUser(deviceID: String) -> String {
        "dev_" + Hex.lowercase(SHA256.hash(data: Data("herald-device|\(deviceID)".utf8)).prefix(16))
    }

    struct Body: Decodable {
        var device_id: String?
        var platform: String?
        var app_version: String?
        var user_id: String?
        var proof: String?
        var device_secret: String?

        static let fields: Set<String> = ["device_id", "platform", "app_version", "user_id", "proof", "device_secret"]
    }

    @Sendable func authenticate(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let client = FailedAuthLimiter.client(of: request, context: context, proxies: proxies)
        if let wait = failures.wait(client) { return FailedAuthLimiter.refusal(wait: wait) }
        do {
            return try await signIn(request, context: context)
        } catch let error as HeraldError {
            failures.record(error, client: client)
            throw error
        }
    }

    private func signIn(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let body = try await JSONBody.decode(Body.self, from: request, context: context, knownFields: Body.fields)
        guard let deviceID = body.device_id else { throw HeraldError.missingField("device_id") }
        try UserID.validate(deviceID, field: "device_id")
        for (field, value) in [("platform", body.platform), ("app_version", body.app_version)] {
            if let value, value.unicodeScalars.count > 64 { throw HeraldError.invalidField(field, "must be at most 64 characters") }
        }
        if let secret = body.device_secret, secret.utf8.count > 256 { throw HeraldError.invalidField("device_secret", "must be at most 256 bytes") }
        guard let userTokens else {
            throw HeraldError(.forbidden, code: "device_auth_disabled", "device sign-in needs user tokens: set user_token_secret")
        }
        let now = Date()
        var expires = now.addingTimeInterval(tokenLifetime.seconds)
        let userID: String
        var newSecret: String?
        if let proof = body.proof {
            let proven = try await verifiedProof(proof, userTokens: userTokens)
            if let claimed = body.user_id, !UserID.same(claimed, proven.userID) {
                throw HeraldError(.forbidden, code: "proof_mismatch", "'proof' was issued for another user than 'user_id'")
            }
            userID = proven.userID
            // The backend said how long this sign-in may last.
            expires = min(expires, proven.expires)
        } else {
            if body.user_id != nil {
                throw HeraldError(.unauthorized, code: "proof_required", "acting as 'user_id' needs 'proof', a user token from the backend")
            }
            guard signUp else {
                throw HeraldError(.forbidden, code: "sign_up_disabled", "anonymous devices are not enabled (auth.device_sign_up); send 'proof'")
            }
            guard deviceID.unicodeScalars.count >= Self.minimumAnonymousDeviceID else {
                throw HeraldError.invalidField(
                    "device_id", "must be at least \(Self.minimumAnonymousDeviceID) characters for an anonymous device (a random id the app keeps)")
            }
            userID = Self.anonymousUser(deviceID: deviceID)
            if body.device_secret == nil, let refusal = limitSignUp(request, context: context) { return refusal }
        }
        // Read before a new secret is stored: once stored, the answer must go out, or the
        // device would never learn the secret its account now needs.
        let state = try await cards.cardState(userID: userID)
        if body.proof == nil { newSecret = try await checkDeviceSecret(body.device_secret, userID: userID, now: now) }
        let token = try await userTokens.signDevice(userID: userID, deviceID: deviceID, expires: expires, issued: now)
        struct Answer: Encodable {
            var token: String
            var user_id: String
            var cache_key: String
            var expires_at: String
            var device_secret: String?
        }
        return try JSONBody.response(
            Answer(
                token: token, user_id: userID, cache_key: CardCacheKey.text(userID: userID, state: state),
                expires_at: Timestamp.format(Date(timeIntervalSince1970: expires.timeIntervalSince1970.rounded(.down))), device_secret: newSecret))
    }

    /// The backend's token a device signs in with: a device token is refused, and so is one its
    /// user's tokens were ended after.
    private func verifiedProof(_ proof: String, userTokens: UserTokenVerifier) async throws -> UserToken {
        let proven: UserToken
        do {
            proven = try await userTokens.verify(proof)
            try await endedTokens.check(proven)
        } catch let error as HeraldError where error.kind == .unauthorized {
            throw HeraldError(.unauthorized, code: "invalid_proof", "'proof' is not a valid user token: \(error.message)")
        }
        guard proven.kind == .backend else {
            throw HeraldError(
                .unauthorized, code: "invalid_proof",
                "'proof' is a device token, which cannot be exchanged for another: renew with a fresh proof from the backend (or the device secret)")
        }
        return proven
    }

    /// Anonymous sign-ups without a secret, per client address.
    private func limitSignUp(_ request: Request, context: HeraldRequestContext) -> Response? {
        guard let wait = limiter.take(FailedAuthLimiter.client(of: request, context: context, proxies: proxies)) else { return nil }
        return RateLimitedAnswer.response(wait: wait, "too many sign-ups from this address; retry in \(wait) s")
    }

    /// Checks the secret an anonymous device sent against the one it was given; a device
    /// without one is given one when its user is new, or existed before device secrets and the
    /// claim window is open.
    /// - Returns: a new secret to hand the device, or nil when it proved the one it has.
    private func checkDeviceSecret(_ sent: String?, userID: String, now: Date) async throws -> String? {
        let stored = try await store.deviceSecretHash(userID: userID)
        switch (sent, stored) {
        case (let sent?, let stored?):
            // Hashes compared: a guess learns nothing from how long the comparison took.
            guard DeviceSecret.hash(sent) == stored else {
                throw HeraldError(.unauthorized, code: "invalid_device_secret", "'device_secret' is not this device's secret")
            }
            return nil
        case (_?, nil):
            throw HeraldError(.unauthorized, code: "invalid_device_secret", "this device has no secret yet: sign in without 'device_secret' to get one")
        case (nil, _?):
            throw HeraldError(
                .unauthorized, code: "device_secret_required", "this device signed up before: send the 'device_secret' it was given then")
        case (nil, nil):
            if try await store.holdsData(userID: userID), now >= (try await claimDeadline()) {
                throw HeraldError(
                    .unauthorized, code: "device_secret_required",
                    "this anonymous user existed before device secrets and the time to claim it has passed (auth.device_secret_claim_until)")
            }
            let secret = DeviceSecret.generate()
            guard try await store.claimDeviceSecret(userID: userID, secretHash: DeviceSecret.hash(secret), at: now) else {
                // Another sign-in for the same id claimed it first: only that caller holds the secret.
                throw HeraldError(
                    .unauthorized, code: "device_secret_required", "this device signed up before: send the 'device_secret' it was given then")
            }
            return secret
        }
    }

    private func claimDeadline() async throws -> Date {
        if let secretClaimUntil { return secretClaimUntil }
        return (try await store.deviceSecretsSince() ?? .distantPast).addingTimeInterval(Self.claimWindow)
    }
}

/// The secret an anonymous device proves its account with: 32 random bytes, base64url, shown
/// once; Herald keeps its SHA-256.
enum DeviceSecret {
    static let prefix = "hds_"

    static func generate() -> String {
        var random = SystemRandomNumberGenerator()
        return prefix + Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255, using: &random) })
    }

    static func hash(_ secret: String) -> String {
        APIKeySecret.hash(secret)
    }
}
