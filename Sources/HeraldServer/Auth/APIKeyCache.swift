import HeraldCore
import Synchronization

/// Remembers valid API keys for a few seconds, so a busy backend does not cost a database read
/// per request. A revoked key keeps working for at most `lifetime` in a running process.
final class APIKeyCache: Sendable {
    private struct Entry {
        var key: APIKeyRecord
        var until: ContinuousClock.Instant
    }

    private let entries = Mutex<[String: Entry]>([:])
    private let lifetime: Duration
    private let capacity: Int

    init(lifetime: Duration = .seconds(5), capacity: Int = 10_000) {
        self.lifetime = lifetime
        self.capacity = capacity
    }

    /// The key with this secret hash, from the cache or from `store`.
    func key(secretHash: String, store: any APIKeyStore) async throws -> APIKeyRecord? {
        let now = ContinuousClock.now
        if let entry = entries.withLock({ $0[secretHash] }), entry.until > now { return entry.key }
        guard let key = try await store.key(secretHash: secretHash) else {
            entries.withLock { _ = $0.removeValue(forKey: secretHash) }
            return nil
        }
        entries.withLock { entries in
            // Many distinct keys: start over rather than track recency.
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[secretHash] = Entry(key: key, until: now + lifetime)
        }
        return key
    }
}
