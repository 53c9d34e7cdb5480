public import Foundation

/// `send_at_local` (docs/timing.md): a wall-clock time each recipient gets the notification at,
/// in their own time zone: every day's (`"09:00"`, the next one) or one date's
/// (`"2026-12-01T09:00"`).
public struct LocalSendTime: Sendable, Hashable, CustomStringConvertible {
    /// A calendar date (proleptic Gregorian).
    public struct Day: Sendable, Hashable {
        /// 0000-9999.
        public var year: Int
        /// 1-12.
        public var month: Int
        /// 1-31, a day the month has.
        public var day: Int
    }

    /// The calendar date, for the dated form; nil for "the next one".
    public var date: Day?
    /// 0-23.
    public var hour: Int
    /// 0-59.
    public var minute: Int

    /// Parses `HH:MM` or `YYYY-MM-DDTHH:MM`; nil for anything else (a date that does not
    /// exist, such as February 30th, included).
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        let clock: Int
        switch bytes.count {
        case 5:
            clock = 0
        case 16:
            guard bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
                let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
                (1...12).contains(month), day >= 1, day <= Self.days(inMonth: month, of: year)
            else { return nil }
            date = Day(year: year, month: month, day: day)
            clock = 11
        default:
            return nil
        }
        guard bytes[clock + 2] == UInt8(ascii: ":"), let hour = number(clock..<clock + 2), let minute = number(clock + 3..<clock + 5),
            hour < 24, minute < 60
        else { return nil }
        self.hour = hour
        self.minute = minute
    }

    /// The minute of the day of a plain `HH:MM` (0-1439); nil for anything else, the dated form
    /// included.
    public static func minuteOfDay(_ text: String) -> Int? {
        guard let time = LocalSendTime(text), time.date == nil else { return nil }
        return time.hour * 60 + time.minute
    }

    /// As it was given (and is stored): `HH:MM` or `YYYY-MM-DDTHH:MM`.
    public var description: String {
        let clock = Self.twoDigits(hour) + ":" + Self.twoDigits(minute)
        guard let date else { return clock }
        let year = String(date.year)
        return String(repeating: "0", count: max(4 - year.count, 0)) + year + "-" + Self.twoDigits(date.month) + "-" + Self.twoDigits(date.day) + "T" + clock
    }

    /// The instant a recipient in `zone` gets it: the dated form's wall-clock time there, or
    /// the first `HH:MM` there not before `now`. A wall-clock time a zone skips (a DST gap)
    /// moves to the next minute that exists; one it passes twice is the first.
    public func instant(in zone: TimeZone, notBefore now: Date) -> Date {
        if let date {
            return Self.instant(ofWallClock: Self.wallSeconds(date.year, date.month, date.day, hour, minute), in: zone)
        }
        // Today's HH:MM in the zone, else tomorrow's: the day is read from the zone's wall clock at `now`.
        let nowWall = Int64(now.timeIntervalSince1970.rounded(.down)) + Int64(zone.secondsFromGMT(for: now))
        let today = nowWall - Self.floorMod(nowWall, 86_400)
        let clock = Int64(hour * 3600 + minute * 60)
        let first = Self.instant(ofWallClock: today + clock, in: zone)
        if first >= now { return first }
        return Self.instant(ofWallClock: today + 86_400 + clock, in: zone)
    }

    /// The dated form's earliest possible instant (in the zone furthest ahead, UTC+14): the
    /// bound "at most a year ahead" is checked against; nil for the daily form.
    public var earliestInstant: Date? {
        guard let date else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(Self.wallSeconds(date.year, date.month, date.day, hour, minute) - 14 * 3600))
    }

    /// The instant whose wall clock in `zone` reads `wall` (seconds since 1970 as if that wall
    /// clock were UTC): of two, the earlier; of none (a gap), the first minute after that exists.
    static func instant(ofWallClock wall: Int64, in zone: TimeZone) -> Date {
        var wall = wall
        // A gap is at most a few hours (the largest, a zone changing its day, is 24 h).
        for _ in 0..<(25 * 60) {
            // The offsets in force around it: one of them is the offset at the instant sought.
            let offsets = Set([-86_400, 0, 86_400].map { zone.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(wall + Int64($0)))) })
            let fits = offsets.map { wall - Int64($0) }.filter { candidate in
                Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(candidate)))) == wall - candidate
            }
            if let first = fits.min() { return Date(timeIntervalSince1970: TimeInterval(first)) }
            wall += 60
        }
        return Date(timeIntervalSince1970: TimeInterval(wall - Int64(zone.secondsFromGMT())))
    }

    /// Seconds since 1970 of a proleptic Gregorian date and time read as UTC.
    static func wallSeconds(_ year: Int, _ month: Int, _ day: Int, _ hour: Int, _ minute: Int) -> Int64 {
        // Days from civil (the era-based algorithm): exact for every year this type parses.
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let monthIndex = Int64(month > 2 ? month - 3 : month + 9)
        let dayOfYear = (153 * monthIndex + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return days * 86_400 + Int64(hour * 3600 + minute * 60)
    }

    static func days(inMonth month: Int, of year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    private static func floorMod(_ value: Int64, _ divisor: Int64) -> Int64 {
        let remainder = value % divisor
        return remainder < 0 ? remainder + divisor : remainder
    }

    private static func twoDigits(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
}
