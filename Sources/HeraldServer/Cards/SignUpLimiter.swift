import Foundation
import Synchronization

/// Anonymous device sign-ups allowed per client address: a token bucket per address holding
/// a minute's allowance, refilled continuously.
final class SignUpLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: Date
    }

    private let perMinute: Double
    private let buckets = Mutex<[String: Bucket]>([:])
    /// Addresses tracked at once; full buckets are dropped first when it is reached.
    private let maxAddresses = 100_000

    init(perMinute: Int) {
        self.perMinute = Double(max(1, perMinute))
    }

    /// Takes one sign-up for `address`. - Returns: nil when allowed, or the seconds until one is.
    func take(_ address: String, now: Date = Date()) -> Int? {
        buckets.withLock { buckets in
            if buckets.count >= maxAddresses {
                buckets = buckets.filter { refill($0.value, now: now).tokens < perMinute }
                if buckets.count >= maxAddresses { buckets.removeAll() }
            }
            var bucket = refill(buckets[address] ?? Bucket(tokens: perMinute, updated: now), now: now)
            guard bucket.tokens >= 1 else {
                buckets[address] = bucket
                return max(1, Int(((1 - bucket.tokens) * 60 / perMinute).rounded(.up)))
            }
            bucket.tokens -= 1
            buckets[address] = bucket
            return nil
        }
    }

    private func refill(_ bucket: Bucket, now: Date) -> Bucket {
        let elapsed = max(0, now.timeIntervalSince(bucket.updated))
        return Bucket(tokens: min(perMinute, bucket.tokens + elapsed * perMinute / 60), updated: now)
    }
}
