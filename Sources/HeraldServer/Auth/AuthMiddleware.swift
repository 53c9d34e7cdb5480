import Foundation
public import HeraldCore
public import Hummingbird

/// Reads `Authorization: Bearer …` and puts the caller into the context. A request without
/// credentials passes through with no caller; routes that need one refuse it with 401.
/// Bad credentials are refused here.
public struct AuthMiddleware: RouterMiddleware {
    public typealias Context = HeraldRequestContext

    let keys: any APIKeyStore
    let userTokens: UserTokenVerifier?
    let cache: APIKeyCache?

    /// - Parameter cacheKeys: remember valid keys for 5 s (a revocation then takes up to 5 s).
    public init(keys: any APIKeyStore, userTokens: UserTokenVerifier?, cacheKeys: Bool = true) {
        self.keys = keys
        self.userTokens = userTokens
        self.cache = cacheKeys ? APIKeyCache() : nil
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let header = request.headers[.authorization] else {
            return try await next(request, context)
        }
        guard header.count > 7, header.prefix(7).lowercased() == "bearer " else {
            throw HeraldError(.unauthorized, code: "invalid_credentials", "use 'Authorization: Bearer <token>'")
        }
        let token = String(header.dropFirst(7).trimmingOptionalWhitespace)
        var context = context
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
            context.caller = .user(try await userTokens.userID(from: token))
            context.logFields.set("caller", "user token")
        } else {
            throw HeraldError(.unauthorized, code: "invalid_credentials", "the bearer token is neither an API key nor a user token")
        }
        return try await next(request, context)
    }
}
