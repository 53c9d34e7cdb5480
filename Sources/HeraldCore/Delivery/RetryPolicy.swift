/// Exponential backoff with jitter for failed deliveries.
public struct RetryPolicy: Sendable, Equatable {
    /// Attempts in all, the first included; the delivery is dead after the last one fails.
    public var maxAttempts: Int
    /// The delay before the second attempt; it doubles after each failure.
    public var baseDelay: Duration
    /// The longest any one delay grows to.
    public var maxDelay: Duration

    /// Eight attempts, from two seconds, capped at an hour, by default.
    public init(maxAttempts: Int = 8, baseDelay: Duration = .seconds(2), maxDelay: Duration = .seconds(3600)) {
        self.maxAttempts = max(1, maxAttempts)
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
    }

    /// The delay after `attempt` (1-based) failed: `base * 2^(attempt-1)`, capped, then
    /// scaled by a random factor in [0.5, 1] so retries from one outage spread out.
    public func delay(afterAttempt attempt: Int, jitter: Double = Double.random(in: 0.5...1)) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let base = baseDelay.seconds * Double(1 << exponent)
        let capped = min(base, maxDelay.seconds)
        return .saturating(seconds: capped * min(max(jitter, 0), 1))
    }
}

extension Duration {
    /// The duration in seconds as a floating-point number.
    public var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
