import Foundation
import HeraldCore
import HeraldHTTP
import Hummingbird
import NIOCore

/// Failed credential checks allowed per client address (`auth.failed_attempts_per_minute`): a
/// token bucket per address (an IPv6 client by its /64, as ``SignUpLimiter`` counts), so nobody
/// can try keys or tokens at the server's full speed. A client with none left is answered 429
/// with `Retry-After` before its credentials are even read; a valid credential costs nothing.
final class FailedAuthLimiter: Sendable {
    private let buckets: TokenBuckets

    init(perMinute: Int, maxAddresses: Int = 100_000) {
        buckets = TokenBuckets(capacity: perMinute, period: 60, maxKeys: maxAddresses)
    }

    /// Seconds until `client` may try again, or nil when it may now.
    func wait(_ client: String, now: Date = Date()) -> Int? {
        buckets.wait(1, for: client, now: now)
    }

    /// The answers that mean a credential was wrong: a key, a token's signature, a proof or a
    /// device secret. A token that is only expired, or ended by a sign-out, had a valid
    /// signature, and every app meets those in normal use (many apps can share one address
    /// behind a carrier's NAT): they are not counted.
    static let guesses: Set<String> = ["invalid_credentials", "invalid_token", "invalid_proof", "invalid_device_secret"]

    /// Counts `error` against `client` when it is a failed guess (``guesses``).
    func record(_ error: HeraldError, client: String, now: Date = Date()) {
        guard error.kind == .unauthorized, Self.guesses.contains(error.code) else { return }
        failedGuess(client: client, now: now)
    }

    /// Counts one wrong credential (a key refused at the portal's sign-in form, say) against `client`.
    func failedGuess(client: String, now: Date = Date()) {
        _ = buckets.take(1, for: client, now: now)
    }

    /// The key a request is counted under: its client's address as ``SignUpLimiter/client(_:)`` names it.
    static func client(of request: Request, context: HeraldRequestContext, proxies: TrustedProxies) -> String {
        SignUpLimiter.client(proxies.client(peer: context.remoteAddress, forwardedFor: request.headers[.xForwardedFor]))
    }

    /// 429 with `Retry-After`.
    static func refusal(wait: Int) -> Response {
        RateLimitedAnswer.response(wait: wait, "too many failed credential checks from this address; retry in \(wait) s (auth.failed_attempts_per_minute)")
    }
}
