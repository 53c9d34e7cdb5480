import Foundation
import Synchronization

/// A token bucket per key: each key may take up to `capacity` units at once, and its bucket
/// refills continuously at `capacity` per `period`. Kept in memory, so each Herald process
/// counts on its own.
package final class TokenBuckets: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: Date
    }

    package let capacity: Int
    package let period: TimeInterval
    private let buckets = Mutex<[String: Bucket]>([:])
    /// Keys tracked at once. When it is reached, full buckets are dropped, then the least
    /// recently seen ones, down to nine tenths: a key whose bucket is dropped starts again with
    /// a full one, so the keys dropped must be those a full one changes least. A key that keeps
    /// asking is seen at every request (a refusal too) and is never among them, so flooding the
    /// table with new keys does not refill it.
    package let maxKeys: Int

    package init(capacity: Int, period: TimeInterval, maxKeys: Int = 100_000) {
        self.capacity = max(1, capacity)
        self.period = period > 0 ? period : 1
        self.maxKeys = max(10, maxKeys)
    }

    /// Keys tracked now.
    package var tracked: Int { buckets.withLock { $0.count } }

    /// Takes `count` units for `key`, all or none.
    /// - Returns: nil when taken, or the whole seconds until `count` units are there (at least
    ///   1). A `count` above `capacity` waits for a full bucket and is then still refused: the
    ///   caller bounds it.
    package func take(_ count: Int = 1, for key: String, now: Date = Date()) -> Int? {
        let count = Double(max(0, count))
        return buckets.withLock { buckets in
            if buckets[key] == nil && buckets.count >= maxKeys {
                evict(&buckets, now: now)
            }
            var bucket = refill(buckets[key] ?? Bucket(tokens: Double(capacity), updated: now), now: now)
            guard bucket.tokens >= count else {
                buckets[key] = bucket
                return secondsUntil(count, in: bucket)
            }
            bucket.tokens -= count
            buckets[key] = bucket
            return nil
        }
    }

    /// Whether `count` units are there for `key`, taking none.
    /// - Returns: nil when they are, or the whole seconds until they are (at least 1).
    package func wait(_ count: Int = 1, for key: String, now: Date = Date()) -> Int? {
        let count = Double(max(0, count))
        return buckets.withLock { buckets in
            guard let stored = buckets[key] else { return nil }
            let bucket = refill(stored, now: now)
            guard bucket.tokens < count else { return nil }
            return secondsUntil(count, in: bucket)
        }
    }

    /// Gives back `count` units taken for `key` that were not used (up to a full bucket).
    package func giveBack(_ count: Int, for key: String, now: Date = Date()) {
        guard count > 0 else { return }
        buckets.withLock { buckets in
            guard let bucket = buckets[key] else { return }
            var refilled = refill(bucket, now: now)
            refilled.tokens = min(Double(capacity), refilled.tokens + Double(count))
            buckets[key] = refilled
        }
    }

    /// Drops full buckets, then the least recently seen, to nine tenths of `maxKeys`, so the sort
    /// is paid once per tenth of the table rather than at every new key.
    private func evict(_ buckets: inout [String: Bucket], now: Date) {
        let capacity = Double(self.capacity)
        buckets = buckets.filter { refill($0.value, now: now).tokens < capacity }
        let keep = maxKeys * 9 / 10
        guard buckets.count > keep else { return }
        let oldest = buckets.map { ($0.key, $0.value.updated) }.sorted { $0.1 < $1.1 }.prefix(buckets.count - keep)
        for (key, _) in oldest { buckets[key] = nil }
    }

    /// Whole seconds (at least 1) until `bucket` holds `count` units, or a full bucket.
    private func secondsUntil(_ count: Double, in bucket: Bucket) -> Int {
        let missing = min(count, Double(capacity)) - bucket.tokens
        return max(1, Int((missing * period / Double(capacity)).rounded(.up)))
    }

    private func refill(_ bucket: Bucket, now: Date) -> Bucket {
        let elapsed = max(0, now.timeIntervalSince(bucket.updated))
        let capacity = Double(self.capacity)
        return Bucket(tokens: min(capacity, bucket.tokens + elapsed * capacity / period), updated: max(now, bucket.updated))
    }
}
