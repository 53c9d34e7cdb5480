import Foundation
public import HeraldCore
import HeraldHTTP
public import Hummingbird

/// Reads `Authorization: Bearer …` and puts the caller into the context. A request without
/// credentials passes through with no caller; routes that need one refuse it with 401.
/// Bad credentials are refused here, and counted against the client's address: past
/// `auth.failed_attempts_per_minute` its requests with credentials are answered 429.
public struct AuthMiddleware: RouterMiddleware {
    public typealias Context = HeraldRequestContext

    let keys: any APIKeyStore
    let userTokens: UserTokenVerifier?
    let cache: APIKeyCache?
    let endedTokens: EndedTokens?
    let failures: FailedAuthLimiter?
    let proxies: TrustedProxies

    /// - Parameter cacheKeys: remember valid keys for 5 s (a revocation then takes up to 5 s).
    public init(keys: any APIKeyStore, userTokens: UserTokenVerifier?, cacheKeys: Bool = true) {
        self.init(keys: keys, userTokens: userTokens, cacheKeys: cacheKeys, endedTokens: nil, failures: nil, proxies: TrustedProxies.none)
    }

    init(
        keys: any APIKeyStore, userTokens: UserTokenVerifier?, cacheKeys: Bool = true, endedTokens: EndedTokens?, failures: FailedAuthLimiter?,
        proxies: TrustedProxies
    ) {
        self.keys = keys
        self.userTokens = userTokens
        self.cache = cacheKeys ? APIKeyCache() : nil
        self.endedTokens = endedTokens
        self.failures = failures
        self.proxies = proxies
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let header = request.headers[.authorization] else {
            return try await next(request, context)
        }
        let client = failures.map { _ in FailedAuthLimiter.client(of: request, context: context, proxies: proxies) }
        if let failures, let client, let wait = failures.wait(client) {
            return FailedAuthLimiter.refusal(wait: wait)
        }
        var context = context
        do {
            try await authenticate(header: header, context: &context)
        } catch let error as HeraldError {
            if let failures, let client { failures.record(error, client: client) }
            throw error
        }
        return try await next(request, context)
    }

    private func authenticate(header: String, context: inout Context) async throws {
        guard header.count > 7, header.prefix(7).lowercased() == "bearer " else {
            throw HeraldError(.unauthorized, code: "invalid_credentials", "use 'Authorization: Bearer <token>'")
        }
        let token = String(header.dropFirst(7).trimmingOptionalWhitespace)
        if token.hasPrefix(APIKeySecret.prefix) {
            let hash = APIKeySecret.hash(token)
            let found: APIKeyRecord?
            if let cache { found = try await cache.key(secretHash: hash, store: keys) } else { found = try await keys.key(secretHash: hash) }
            guard let key = found else {
                throw HeraldError(.unauthorized, code: "invalid_credentials", "the API key is unknown or revoked")
            }
            context.caller = .apiKey(key)
            // The key's id, never its secret.
            context.logFields.set("key_id", key.id.hex)
        } else if token.split(separator: ".", omittingEmptySubsequences: false).count == 3 {
            guard let userTokens else {
                throw HeraldError(.unauthorized, code: "invalid_token", "user tokens are not enabled on this server (set user_token_secret)")
            }
            let verified = try await userTokens.verify(token)
            try await endedTokens?.check(verified)
            context.caller = .user(verified.userID)
            context.userToken = verified
            context.logFields.set("caller", verified.kind == .device ? "device token" : "user token")
        } else {
            throw HeraldError(.unauthorized, code: "invalid_credentials", "the bearer token is neither an API key nor a user token")
        }
    }
}
