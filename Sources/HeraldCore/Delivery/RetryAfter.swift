public import Foundation

/// A provider's `Retry-After` header (RFC 9110 §10.2.3): delay-seconds or an HTTP-date. Any
/// value parses without trapping: an enormous number saturates (the delivery engine then caps
/// it at `delivery.max_retry_after`), and garbage is ignored.
public enum RetryAfter {
    /// The delay the header asks for, counted from `now`; nil for a value that is neither form.
    public static func parse(_ value: String, now: Date = Date()) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return nil }
        if trimmed.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
            // Digits only: delay-seconds, however many (Double cannot overflow here).
            return .saturating(seconds: Double(trimmed) ?? .infinity)
        }
        guard let date = httpDate(trimmed) else { return nil }
        return .saturating(seconds: max(date.timeIntervalSince(now), 0))
    }

    /// IMF-fixdate, and the obsolete RFC 850 and asctime forms a recipient must accept.
    static func httpDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }
}
