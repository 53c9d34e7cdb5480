/// Conversions that clamp instead of trapping. Numbers from outside (a provider's Retry-After, a
/// configuration file, a database row) go through these, so no value can stop the process.
extension Int64 {
    /// `value` rounded to the nearest integer and clamped to Int64's range; NaN is 0.
    public init(saturating value: Double) {
        guard !value.isNaN else {
            self = 0
            return
        }
        // 2^63 is exactly representable; anything at or past it saturates.
        if value >= 9_223_372_036_854_775_807.0 {
            self = .max
        } else if value <= -9_223_372_036_854_775_808.0 {
            self = .min
        } else {
            self = Int64(value.rounded())
        }
    }
}

extension FixedWidthInteger {
    /// `self + other`, clamped to the type's range.
    @inlinable public func saturatingAdd(_ other: Self) -> Self {
        let (sum, overflow) = addingReportingOverflow(other)
        guard overflow else { return sum }
        return other > 0 ? .max : .min
    }
}

extension Duration {
    /// A duration of `seconds`, clamped to ±100 years (any longer wait is a fault, not a plan);
    /// NaN is zero.
    public static func saturating(seconds: Double) -> Duration {
        guard !seconds.isNaN else { return .zero }
        let limit = 100 * 365.25 * 86_400.0
        return .milliseconds(Int64(saturating: Swift.min(Swift.max(seconds, -limit), limit) * 1000))
    }
}
