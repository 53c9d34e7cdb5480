import Crypto
import Foundation
import HeraldCore
import Hummingbird

/// `POST /api/auth/device` (SPEC §12): an app's device gets a user token. With a backend's
/// `proof` (a user token for `user_id`) it acts for that user; without one, when
/// `auth.device_sign_up` is on, it gets an anonymous user derived from its `device_id`.
struct DeviceAuthRoutes {
    let store: any CardStore
    let userTokens: UserTokenVerifier?
    let signUp: Bool
    let limiter: SignUpLimiter
    /// Whose `X-Forwarded-For` names the client the limiter counts.
    let proxies: TrustedProxies
    let tokenLifetime: Duration

    func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .post, "/api/auth/device", authenticate)
    }

    /// `dev_` and 32 hex digits of the device id's SHA-256: the same device always gets the same user.
    static func anonymousUser(deviceID: String) -> String {
        "dev_" + Hex.lowercase(SHA256.hash(data: Data("herald-device|\(deviceID)".utf8)).prefix(16))
    }

    @Sendable func authenticate(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        struct Body: Decodable {
            var device_id: String?
            var platform: String?
            var app_version: String?
            var user_id: String?
            var proof: String?
        }
        let body = try await JSONBody.decode(
            Body.self, from: request, context: context, knownFields: ["device_id", "platform", "app_version", "user_id", "proof"]
        )
        guard let deviceID = body.device_id else { throw HeraldError.missingField("device_id") }
        try UserID.validate(deviceID, field: "device_id")
        for (field, value) in [("platform", body.platform), ("app_version", body.app_version)] {
            if let value, value.unicodeScalars.count > 64 { throw HeraldError.invalidField(field, "must be at most 64 characters") }
        }
        guard let userTokens else {
            throw HeraldError(.forbidden, code: "device_auth_disabled", "device sign-in needs user tokens: set user_token_secret")
        }
        let userID: String
        if let proof = body.proof {
            let proven: String
            do {
                proven = try await userTokens.userID(from: proof)
            } catch let error as HeraldError {
                throw HeraldError(.unauthorized, code: "invalid_proof", "'proof' is not a valid user token: \(error.message)")
            }
            if let claimed = body.user_id, claimed != proven {
                throw HeraldError(.forbidden, code: "proof_mismatch", "'proof' was issued for another user than 'user_id'")
            }
            userID = proven
        } else {
            if body.user_id != nil {
                throw HeraldError(.unauthorized, code: "proof_required", "acting as 'user_id' needs 'proof', a user token from the backend")
            }
            guard signUp else {
                throw HeraldError(.forbidden, code: "sign_up_disabled", "anonymous devices are not enabled (auth.device_sign_up); send 'proof'")
            }
            let client = proxies.client(peer: context.remoteAddress, forwardedFor: request.headers[.xForwardedFor])
            if let wait = limiter.take(SignUpLimiter.client(client)) {
                var response = ErrorMiddleware<HeraldRequestContext>.response(
                    status: .tooManyRequests, code: "rate_limited", message: "too many sign-ups from this address; retry in \(wait) s"
                )
                response.headers[.retryAfter] = String(wait)
                return response
            }
            userID = Self.anonymousUser(deviceID: deviceID)
        }
        let token = try await userTokens.sign(userID: userID, expires: Date().addingTimeInterval(tokenLifetime.seconds))
        let state = try await store.cardState(userID: userID)
        struct Answer: Encodable {
            var token: String
            var user_id: String
            var cache_key: String
        }
        return try JSONBody.response(Answer(token: token, user_id: userID, cache_key: CardCacheKey.text(userID: userID, state: state)))
    }
}
