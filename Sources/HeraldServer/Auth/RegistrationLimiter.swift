import Foundation
import HeraldCore
import HeraldHTTP

/// Device registrations allowed per user and per API key (`devices.registrations_per_user_per_minute`,
/// `devices.registrations_per_key_per_minute`). Each registration may name a new push service
/// host, which Herald looks up and remembers; unbounded, a client could register addresses
/// until every other host's verdict was forgotten, and fill the devices table's churn.
final class RegistrationLimiter: Sendable {
    private let users: TokenBuckets
    private let keys: TokenBuckets

    init(perUser: Int, perKey: Int) {
        users = TokenBuckets(capacity: perUser, period: 60)
        keys = TokenBuckets(capacity: perKey, period: 60, maxKeys: 10_000)
    }

    /// Takes one registration for `userID` and, when an API key acts for them, for the key.
    /// - Returns: nil when taken, or the seconds until one is.
    func take(userID: String, caller: Caller?, now: Date = Date()) -> Int? {
        if let wait = users.take(for: userID, now: now) { return wait }
        guard case .apiKey(let key) = caller, let wait = keys.take(for: key.id.hex, now: now) else { return nil }
        // Refused: the user's unit goes back, so a key at its limit does not use up its users'.
        users.giveBack(1, for: userID, now: now)
        return wait
    }
}
