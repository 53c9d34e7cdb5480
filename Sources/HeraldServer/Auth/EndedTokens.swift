import Foundation
import HeraldCore
import HeraldHTTP
import HeraldStore
import Synchronization

/// Refuses user and device tokens issued before their user's tokens were ended (an erasure, a
/// sign-out: ``UserCredentialStore/endTokens(userID:issuedBefore:)``). What the store says of a
/// user is remembered for ``lifetime``, as API keys are (``APIKeyCache``): a process that did
/// not end the tokens itself refuses them within that time (docs/security.md).
final class EndedTokens: Sendable {
    private struct Entry {
        var endedBefore: Date?
        var until: ContinuousClock.Instant
    }

    static let lifetime = Duration.seconds(5)

    private let store: any UserCredentialStore
    private let entries = Mutex<[String: Entry]>([:])
    private let capacity: Int

    init(store: any UserCredentialStore, capacity: Int = 100_000) {
        self.store = store
        self.capacity = capacity
    }

    /// - Throws: a 401 ``HeraldError`` (`token_ended`) for a token issued before its user's
    ///   tokens were ended, or without `iat` once they were.
    func check(_ token: UserToken) async throws {
        guard let ended = try await endedBefore(userID: token.userID) else { return }
        guard let issued = token.issuedAt, issued >= ended else {
            throw HeraldError(
                .unauthorized, code: "token_ended",
                "the user token was issued before this user's tokens were ended (an erasure or a sign-out): ask for a new one")
        }
    }

    /// Whether a live stream's token still holds: not expired, and its user's tokens not ended
    /// since. A storage error keeps the stream (its next heartbeat asks again).
    func stillValid(_ token: UserToken, now: Date = Date()) async -> Bool {
        guard now < token.expires else { return false }
        do {
            try await check(token)
            return true
        } catch let error as HeraldError where error.kind == .unauthorized {
            return false
        } catch {
            return true
        }
    }

    /// Ends the user's tokens in this process at once (other processes within ``lifetime``).
    func ended(userID: String, before date: Date) {
        entries.withLock { $0[userID] = Entry(endedBefore: date, until: .now + Self.lifetime) }
    }

    private func endedBefore(userID: String) async throws -> Date? {
        let now = ContinuousClock.now
        if let entry = entries.withLock({ $0[userID] }), entry.until > now { return entry.endedBefore }
        let read = try await store.tokensEndedBefore(userID: userID)
        return entries.withLock { entries in
            // Many distinct users: start over rather than track recency.
            if entries[userID] == nil && entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            // Endings only move later: one this process recorded while the read was under way
            // is kept if it is the later.
            let latest = [entries[userID]?.endedBefore, read].compactMap { $0 }.max()
            entries[userID] = Entry(endedBefore: latest, until: now + Self.lifetime)
            return latest
        }
    }
}
