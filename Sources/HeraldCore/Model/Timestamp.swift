public import Foundation

/// How instants are written where apps parse them (history items, push data): `pong` is
/// `2022-04-08T15:17:41.900560` (UTC, six fractional digits, no offset), the form the Pong app
/// parses and Herald's default; `rfc3339` adds the `Z`.
public enum TimestampStyle: String, Sendable, CaseIterable {
    /// `2022-04-08T15:17:41.900560`: UTC, no offset (the default).
    case pong
    /// `2022-04-08T15:17:41.900560Z`.
    case rfc3339

    /// `date` in this style, to the microsecond.
    public func format(_ date: Date) -> String {
        let text = Timestamp.format(date)
        return self == .pong ? String(text.dropLast()) : text
    }
}

/// Herald's wire format for instants: RFC 3339 in UTC with microseconds, as apps already parse
/// (`2022-04-08T15:17:41.900560Z`). Stored instants are whole microseconds since the epoch.
public enum Timestamp {
    /// The instants Herald stores and formats: 0001-01-01 to 9999-12-31 (UTC). Anything outside
    /// (a provider's far-future date, a corrupt row) is clamped, never a trap.
    public static let representable: ClosedRange<Int64> = -62_135_596_800_000_000...253_402_300_799_999_999

    /// Rounded, not truncated: a stored instant read back as a `Date` and converted again gives
    /// the same number (a truncation can lose a microsecond to floating point, and with it a
    /// millisecond where an archive and a push both show the instant).
    public static func microseconds(_ date: Date) -> Int64 {
        clamp(Int64(saturating: (date.timeIntervalSince1970 * 1_000_000).rounded()))
    }

    /// The instant a stored value names, clamped to ``representable``.
    public static func date(microseconds: Int64) -> Date {
        Date(timeIntervalSince1970: TimeInterval(clamp(microseconds)) / 1_000_000)
    }

    static func clamp(_ microseconds: Int64) -> Int64 {
        min(max(microseconds, representable.lowerBound), representable.upperBound)
    }

    /// `date` as RFC 3339 in UTC with six fractional digits and `Z`.
    public static func format(_ date: Date) -> String {
        format(microseconds: microseconds(date))
    }

    /// A stored value as RFC 3339 (``format(_:)``), clamped to ``representable`` first.
    public static func format(microseconds unclamped: Int64) -> String {
        let microseconds = clamp(unclamped)
        let seconds = microseconds >= 0 ? microseconds / 1_000_000 : (microseconds - 999_999) / 1_000_000
        let fraction = microseconds - seconds * 1_000_000
        let (year, month, day) = civilDate(daysSinceEpoch: seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400)
        let secondOfDay = seconds - (seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400) * 86_400
        return
            "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2)).\(pad(fraction, 6))Z"
    }

    /// Parses an RFC 3339 `date-time` (§5.6), exactly the form JSON Schema's `date-time` format
    /// names: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`, `T` and `Z` in either case, a leap second
    /// (:60) read as the next second. Anything else is nil.
    public static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        var index = 0
        func digits(_ count: Int) -> Int64? {
            guard index + count <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[index..<index + count] {
                guard byte >= 48 && byte <= 57 else { return nil }
                value = value * 10 + Int64(byte - 48)
            }
            index += count
            return value
        }
        func expect(_ characters: String) -> Bool {
            guard index < bytes.count, characters.utf8.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        guard let year = digits(4), expect("-"), let month = digits(2), expect("-"), let day = digits(2), expect("Tt"),
            let hour = digits(2), expect(":"), let minute = digits(2), expect(":"), let second = digits(2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour <= 23, minute <= 59, second <= 60 else { return nil }
        var fraction = 0.0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            var scale = 0.1
            let start = index
            while index < bytes.count, bytes[index] >= 48 && bytes[index] <= 57 {
                fraction += Double(bytes[index] - 48) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        var offset: Int64 = 0
        if expect("Zz") {
        } else if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
            let sign: Int64 = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let offsetHours = digits(2), expect(":"), let offsetMinutes = digits(2), offsetHours <= 23, offsetMinutes <= 59 else { return nil }
            offset = sign * (offsetHours * 3600 + offsetMinutes * 60)
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }
        let seconds = daysFromCivil(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: TimeInterval(seconds) + fraction)
    }

    static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    // Howard Hinnant's days-from-civil: exact for the proleptic Gregorian calendar.
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }

    // Howard Hinnant's days-from-civil inverse: exact for the proleptic Gregorian calendar.
    static func civilDate(daysSinceEpoch: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = daysSinceEpoch + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
