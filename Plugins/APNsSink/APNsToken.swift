import Crypto
import Foundation
import JWTKit
import Synchronization

/// The provider authentication token APNs wants in `authorization: bearer …`: an ES256 JWT
/// with `kid` = the key id, `iss` = the team id and `iat`. One token is reused and replaced
/// after `refreshAfter` (50 min: APNs refuses tokens older than an hour, and answers
/// TooManyProviderTokenUpdates to new ones more often than every 20 min), and at once when APNs
/// answers ExpiredProviderToken. Concurrent sends share one refresh.
actor APNsTokenProvider {
    struct Token {
        var value: String
        var issuedAt: Date
    }

    static let refreshAfter: TimeInterval = 50 * 60

    private let keys: JWTKeyCollection
    private let keyID: String
    private let teamID: String
    private let clock: @Sendable () -> Date
    /// The current token, behind a lock so that every send reads it without hopping onto the
    /// actor; refreshes (rare) go through the actor, one at a time.
    private let cached = Mutex<Token?>(nil)
    private var refreshing: Task<Token, any Error>?
    private(set) var issued = 0

    init(key: P256.Signing.PrivateKey, keyID: String, teamID: String, clock: @escaping @Sendable () -> Date) async throws {
        self.keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PrivateKey(backing: key), kid: JWKIdentifier(string: keyID))
        self.keyID = keyID
        self.teamID = teamID
        self.clock = clock
    }

    struct Claims: JWTPayload {
        var iss: String
        var iat: Int
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    nonisolated func token() async throws -> Token {
        let now = clock()
        if let current = freshToken(at: now) { return current }
        return try await refreshedToken(at: now)
    }

    /// The current token unless it is due for replacement at `now`.
    private nonisolated func freshToken(at now: Date) -> Token? {
        cached.withLock { $0.flatMap { now.timeIntervalSince($0.issuedAt) < Self.refreshAfter ? $0 : nil } }
    }

    private func refreshedToken(at now: Date) async throws -> Token {
        // Another send's refresh may have finished while this one waited for the actor.
        if let current = freshToken(at: now) { return current }
        return try await refresh(at: now)
    }

    /// APNs said `expired` is expired: a new token at once, unless another send already
    /// replaced it.
    func expired(_ expired: Token) async throws -> Token {
        if let current = cached.withLock({ $0 }), current.value != expired.value { return current }
        return try await refresh(at: clock())
    }

    /// One signing for every send that finds the token missing or stale meanwhile: signing
    /// suspends, and an actor lets the next caller in while it does, so without this each
    /// concurrent first send signed a token of its own (and APNs answers
    /// TooManyProviderTokenUpdates to tokens replaced that often).
    private func refresh(at now: Date) async throws -> Token {
        if let refreshing { return try await refreshing.value }
        let task = Task { try await self.issue(at: now) }
        refreshing = task
        defer { refreshing = nil }
        return try await task.value
    }

    private func issue(at now: Date) async throws -> Token {
        let value = try await keys.sign(Claims(iss: teamID, iat: Int(now.timeIntervalSince1970)), kid: JWKIdentifier(string: keyID))
        let token = Token(value: value, issuedAt: now)
        cached.withLock { $0 = token }
        issued += 1
        return token
    }
}
