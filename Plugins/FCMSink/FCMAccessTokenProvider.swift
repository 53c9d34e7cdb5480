import AsyncHTTPClient
import Foundation
import HeraldCore
import JWTKit
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import Synchronization

/// OAuth 2.0 access tokens for FCM from a service account (JWT-bearer grant, RS256).
///
/// Tokens are cached and refreshed a few minutes before they expire; concurrent callers share
/// one refresh in flight.
public actor FCMAccessTokenProvider {
    /// The OAuth scope FCM's send API needs.
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    struct Token {
        var value: String
        var refreshAt: Date
        var expiresAt: Date
    }

    private let account: ServiceAccount
    private let http: HTTPClient
    private let keys: JWTKeyCollection
    private let clock: @Sendable () -> Date
    /// The cached token, behind a lock so that every send can read it without hopping onto
    /// the actor; refreshes (rare) still go through the actor, which makes them one at a time.
    private let cached = Mutex<Token?>(nil)
    private var refreshing: Task<Token, any Error>?
    /// Token requests made so far (for `herald sinks` and tests).
    public private(set) var refreshCount = 0
    private let onRefresh: @Sendable () -> Void
    private let timeout: Duration

    /// - Parameters:
    ///   - account: the service account whose key signs the token requests.
    ///   - http: the client the token requests go through.
    ///   - timeout: how long one token request may take, connecting included.
    ///   - clock: the time tokens are judged fresh by (tests move it).
    ///   - onRefresh: called for each token request (metrics).
    public init(
        account: ServiceAccount, http: HTTPClient, timeout: Duration = .seconds(30), clock: @escaping @Sendable () -> Date = { Date() },
        onRefresh: @escaping @Sendable () -> Void = {}
    ) async throws {
        let key: Insecure.RSA.PrivateKey
        do {
            key = try Insecure.RSA.PrivateKey(pem: account.privateKey)
        } catch {
            throw FCMError.configuration("the service account's private_key is not an RSA private key in PEM form")
        }
        self.account = account
        self.http = http
        self.clock = clock
        self.onRefresh = onRefresh
        self.timeout = timeout
        self.keys = JWTKeyCollection()
        // `iat` and `exp` in whole seconds, as Google's own clients send them (JWTKit writes a
        // fraction by default).
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .integerSecondsSince1970
        await keys.add(rsa: key, digestAlgorithm: .sha256, serializer: DefaultJWTSerializer(jsonEncoder: encoder))
    }

    /// A valid access token, fetching one if none is cached or the cached one is due for refresh.
    public nonisolated func token() async throws -> String {
        if let value = cachedToken(usableUntil: \.refreshAt) { return value }
        return try await refreshedToken()
    }

    /// The cached token while `clock()` is before its `deadline` (refresh or expiry), else nil.
    private nonisolated func cachedToken(usableUntil deadline: KeyPath<Token, Date>) -> String? {
        let now = clock()
        return cached.withLock { $0.flatMap { now < $0[keyPath: deadline] ? $0.value : nil } }
    }

    private func refreshedToken() async throws -> String {
        // Another caller's refresh may have finished while this one waited for the actor.
        if let value = cachedToken(usableUntil: \.refreshAt) { return value }
        do {
            return try await refresh().value
        } catch {
            // We refresh early; while the old token has not expired, a failed refresh is no outage.
            if let value = cachedToken(usableUntil: \.expiresAt) { return value }
            throw error
        }
    }

    /// Drops `value` after FCM refused it (401), so the next call fetches a new token.
    public nonisolated func invalidate(_ value: String) {
        cached.withLock { if $0?.value == value { $0 = nil } }
    }

    private func refresh() async throws -> Token {
        if let refreshing { return try await refreshing.value }
        let task = Task { try await self.fetch() }
        refreshing = task
        defer { refreshing = nil }
        let token = try await task.value
        cached.withLock { $0 = token }
        return token
    }

    struct Assertion: JWTPayload {
        var iss: IssuerClaim
        var scope: String
        var aud: AudienceClaim
        var iat: IssuedAtClaim
        var exp: ExpirationClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    private func fetch() async throws -> Token {
        refreshCount += 1
        onRefresh()
        let now = clock()
        let assertion = try await keys.sign(
            Assertion(
                iss: .init(value: account.clientEmail), scope: Self.scope, aud: .init(value: [account.tokenURI]),
                iat: .init(value: now), exp: .init(value: now.addingTimeInterval(3600))
            ),
            kid: account.privateKeyID.map { JWKIdentifier(string: $0) }
        )
        var request = HTTPClientRequest(url: account.tokenURI)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(ByteBuffer(string: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"))
        let response: HTTPClientResponse
        let body: ByteBuffer
        do {
            response = try await http.execute(request, timeout: TimeAmount(timeout))
            body = try await response.body.collect(upTo: 1 << 20)
        } catch {
            throw FCMError.tokenRequest("token request to \(account.tokenURI) failed: \(error)")
        }
        struct Answer: Decodable {
            var access_token: String?
            var expires_in: Double?
            var error: String?
            var error_description: String?
        }
        let answer = try? JSONDecoder().decode(Answer.self, from: Data(buffer: body))
        guard response.status == .ok, let value = answer?.access_token, !value.isEmpty else {
            let detail = [answer?.error, answer?.error_description].compactMap { $0 }.joined(separator: ": ")
            throw FCMError.tokenRequest("token endpoint answered \(response.status.code)\(detail.isEmpty ? "" : " (\(detail))")")
        }
        let lifetime = max(answer?.expires_in ?? 3600, 1)
        // Refresh five minutes early, or halfway through for short-lived tokens.
        let margin = min(300, lifetime / 2)
        return Token(value: value, refreshAt: now.addingTimeInterval(lifetime - margin), expiresAt: now.addingTimeInterval(lifetime))
    }
}
