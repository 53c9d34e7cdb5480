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
        guard let date = httpDate(trimmed, now: now) else { return nil }
        return .saturating(seconds: max(date.timeIntervalSince(now), 0))
    }

    /// IMF-fixdate, and the obsolete RFC 850 and asctime forms a recipient must accept
    /// (RFC 9110 §5.6.7), read byte by byte: no `DateFormatter`, whose CoreFoundation calendar
    /// and locale machinery is slow and has had memory faults on Linux, for a provider's header.
    static func httpDate(_ text: String, now: Date = Date()) -> Date? {
        let words = text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        let day: Int64?
        let month: Int64?
        let year: Int64?
        let time: String
        switch words.count {
        case 6 where words[5] == "GMT" && words[0].hasSuffix(","):
            // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
            guard words[1].utf8.count == 2, words[3].utf8.count == 4 else { return nil }
            (day, month, year, time) = (Int64(words[1]), months[words[2]], Int64(words[3]), words[4])
        case 4 where words[3] == "GMT" && words[0].hasSuffix(","):
            // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
            let parts = words[1].split(separator: "-", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3, parts[0].utf8.count == 2, parts[2].utf8.count == 2, let short = Int64(parts[2]) else { return nil }
            (day, month, time) = (Int64(parts[0]), months[parts[1]], words[2])
            // A two-digit year more than 50 years ahead is in the past century (RFC 9110).
            let current = Timestamp.civilDate(daysSinceEpoch: Int64(saturating: (now.timeIntervalSince1970 / 86_400).rounded(.down))).year
            var full = current - current % 100 + short
            if full > current + 50 { full -= 100 }
            year = full
        case 5:
            // asctime: Sun Nov  6 08:49:37 1994
            guard words[2].utf8.count <= 2, words[4].utf8.count == 4 else { return nil }
            (day, month, year, time) = (Int64(words[2]), months[words[1]], Int64(words[4]), words[3])
        default:
            return nil
        }
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard let day, let month, let year, clock.count == 3, clock.allSatisfy({ $0.utf8.count == 2 }),
            let hour = Int64(clock[0]), let minute = Int64(clock[1]), let second = Int64(clock[2]),
            (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second),
            (1...9999).contains(year), day <= Timestamp.daysIn(month: month, year: year)
        else { return nil }
        let days = Timestamp.daysFromCivil(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: Double(days * 86_400 + hour * 3_600 + minute * 60 + second))
    }

    private static let months: [String: Int64] = [
        "Jan": 1, "Feb": 2, "Mar": 3, "Apr": 4, "May": 5, "Jun": 6, "Jul": 7, "Aug": 8, "Sep": 9, "Oct": 10, "Nov": 11, "Dec": 12,
    ]
}
