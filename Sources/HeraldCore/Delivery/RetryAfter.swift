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
        let day: Int?
        let month: Int?
        let year: Int?
        let time: String
        switch words.count {
        case 6 where words[5] == "GMT" && words[0].hasSuffix(","):
            // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
            guard words[1].utf8.count == 2, words[3].utf8.count == 4 else { return nil }
            (day, month, year, time) = (Int(words[1]), months[words[2]], Int(words[3]), words[4])
        case 4 where words[3] == "GMT" && words[0].hasSuffix(","):
            // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
            let parts = words[1].split(separator: "-", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3, parts[0].utf8.count == 2, parts[2].utf8.count == 2, let short = Int(parts[2]) else { return nil }
            (day, month, time) = (Int(parts[0]), months[parts[1]], words[2])
            // A two-digit year more than 50 years ahead is in the past century (RFC 9110).
            let current = Self.civil(from: now).year
            var full = current - current % 100 + short
            if full > current + 50 { full -= 100 }
            year = full
        case 5:
            // asctime: Sun Nov  6 08:49:37 1994
            guard words[2].utf8.count <= 2, words[4].utf8.count == 4 else { return nil }
            (day, month, year, time) = (Int(words[2]), months[words[1]], Int(words[4]), words[3])
        default:
            return nil
        }
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard let day, let month, let year, clock.count == 3, clock.allSatisfy({ $0.utf8.count == 2 }),
            let hour = Int(clock[0]), let minute = Int(clock[1]), let second = Int(clock[2]),
            (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second),
            (1...9999).contains(year), day <= daysIn(month: month, year: year)
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: Double(days * 86_400 + hour * 3_600 + minute * 60 + second))
    }

    private static let months = [
        "Jan": 1, "Feb": 2, "Mar": 3, "Apr": 4, "May": 5, "Jun": 6, "Jul": 7, "Aug": 8, "Sep": 9, "Oct": 10, "Nov": 11, "Dec": 12,
    ]

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The year of `date` in UTC.
    static func civil(from date: Date) -> (year: Int, dayOfYear: Int) {
        let days = Int((date.timeIntervalSince1970 / 86_400).rounded(.down))
        var year = 1970 + days / 366
        while daysFromCivil(year: year + 1, month: 1, day: 1) <= days { year += 1 }
        while daysFromCivil(year: year, month: 1, day: 1) > days { year -= 1 }
        return (year, days - daysFromCivil(year: year, month: 1, day: 1))
    }
}
