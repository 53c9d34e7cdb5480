import Foundation
import NIOCore
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
    /// Clients tracked at once. When it is reached, full buckets are dropped, then the least
    /// recently seen ones, down to nine tenths: a client whose bucket is dropped starts again
    /// with a full one, so the clients dropped must be those a full one changes least. A client
    /// that keeps asking is seen at every request (a refusal too) and is never among them, so
    /// flooding the table from many addresses does not refill it (it once emptied the table).
    private let maxAddresses: Int

    init(perMinute: Int, maxAddresses: Int = 100_000) {
        self.perMinute = Double(max(1, perMinute))
        self.maxAddresses = max(10, maxAddresses)
    }

    /// Clients tracked now.
    var tracked: Int { buckets.withLock { $0.count } }

    /// Takes one sign-up for `address`. - Returns: nil when allowed, or the seconds until one is.
    func take(_ address: String, now: Date = Date()) -> Int? {
        buckets.withLock { buckets in
            if buckets[address] == nil && buckets.count >= maxAddresses {
                evict(&buckets, now: now)
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

    /// Whom a limit counts: an IPv4 address, or an IPv6 address's /64. One IPv6 host commonly
    /// holds a whole /64 (SLAAC privacy addresses, or any address it likes), so counting each
    /// address would give it 2^64 allowances. An IPv4 client reaching a dual-stack listener comes
    /// as `::ffff:a.b.c.d` and counts as its IPv4 address, not as one /64 shared by every IPv4
    /// client.
    static func client(_ address: SocketAddress?) -> String {
        guard case .v6(let v6) = address else { return address?.ipAddress ?? "unknown" }
        // sockaddr_in6: family and port (4 bytes), flow info (4), then the 16 address bytes.
        let raw = withUnsafeBytes(of: v6.address) { Array($0) }
        guard raw.count >= 24 else { return address?.ipAddress ?? "unknown" }
        let bytes = Array(raw[8..<24])
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
            return bytes[12..<16].map(String.init).joined(separator: ".")
        }
        return stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }.joined(separator: ":") + "::/64"
    }

    /// Drops full buckets, then the least recently seen, to nine tenths of `maxAddresses`, so the
    /// sort is paid once per tenth of the table rather than at every new client.
    private func evict(_ buckets: inout [String: Bucket], now: Date) {
        buckets = buckets.filter { refill($0.value, now: now).tokens < perMinute }
        let keep = maxAddresses * 9 / 10
        guard buckets.count > keep else { return }
        let oldest = buckets.map { ($0.key, $0.value.updated) }.sorted { $0.1 < $1.1 }.prefix(buckets.count - keep)
        for (address, _) in oldest { buckets[address] = nil }
    }

    private func refill(_ bucket: Bucket, now: Date) -> Bucket {
        let elapsed = max(0, now.timeIntervalSince(bucket.updated))
        return Bucket(tokens: min(perMinute, bucket.tokens + elapsed * perMinute / 60), updated: now)
    }
}
