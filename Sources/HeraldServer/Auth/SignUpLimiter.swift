import Foundation
import HeraldHTTP
import NIOCore

/// Anonymous device sign-ups allowed per client address: a token bucket per address holding
/// a minute's allowance, refilled continuously.
final class SignUpLimiter: Sendable {
    private let buckets: TokenBuckets

    init(perMinute: Int, maxAddresses: Int = 100_000) {
        buckets = TokenBuckets(capacity: perMinute, period: 60, maxKeys: maxAddresses)
    }

    /// Clients tracked now.
    var tracked: Int { buckets.tracked }

    /// Takes one sign-up for `address`. - Returns: nil when allowed, or the seconds until one is.
    func take(_ address: String, now: Date = Date()) -> Int? {
        buckets.take(1, for: address, now: now)
    }

    /// Whom a limit counts: an IPv4 address, or an IPv6 address's /64. One IPv6 host commonly
    /// holds a whole /64 (SLAAC privacy addresses, or any address it likes), so counting each
    /// address would give it 2^64 allowances. An IPv4 client reaching a dual-stack listener comes
    /// as `::ffff:a.b.c.d` and counts as its IPv4 address, not as one /64 shared by every IPv4
    /// client.
    static func client(_ address: SocketAddress?) -> String {
        guard let bytes = address?.unmappedIPBytes else { return address?.ipAddress ?? "unknown" }
        guard bytes.count == 16 else { return bytes.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }.joined(separator: ":") + "::/64"
    }
}
