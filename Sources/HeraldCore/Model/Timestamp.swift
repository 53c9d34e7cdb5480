public import Foundation

/// How instants are written where apps parse them (history items, push data): `pong` is
/// `2022-04-08T15:17:41.900560` (UTC, six fractional digits, no offset), the form the Pong app
/// parses and Herald's default; `rfc3339` adds the `Z`.
public enum TimestampStyle: String, Sendable, CaseIterable {
    case pong
    case rfc3339

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

    public static func microseconds(_ date: Date) -> Int64 {
        clamp(Int64(saturating: date.timeIntervalSince1970 * 1_000_000))
    }

    public static func date(microseconds: Int64) -> Date {
        Date(timeIntervalSince1970: TimeInterval(clamp(microseconds)) / 1_000_000)
    }

    static func clamp(_ microseconds: Int64) -> Int64 {
        min(max(microseconds, representable.lowerBound), representable.upperBound)
    }

    public static func format(_ date: Date) -> String {
        format(microseconds: microseconds(date))
    }

    public static func format(microseconds unclamped: Int64) -> String {
        let microseconds = clamp(unclamped)
        let seconds = microseconds >= 0 ? microseconds / 1_000_000 : (microseconds - 999_999) / 1_000_000
        let fraction = microseconds - seconds * 1_000_000
        let (year, month, day) = civilDate(daysSinceEpoch: seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400)
        let secondOfDay = seconds - (seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400) * 86_400
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2)).\(pad(fraction, 6))Z"
    }

    /// Parses RFC 3339 / ISO 8601 instants with or without fractional seconds.
    public static func parse(_ text: String) -> Date? {
        if let date = try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) {
            return date
        }
        return try? Date(text, strategy: Date.ISO8601FormatStyle())
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }

    // Howard Hinnant's days-from-civil inverse: exact for the proleptic Gregorian calendar.
    private static func civilDate(daysSinceEpoch: Int64) -> (Int64, Int64, Int64) {
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
