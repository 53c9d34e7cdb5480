public import Foundation

/// Whether a user wants push at all, or prefers to pull from history.
public enum DeliveryPreference: String, Sendable, Codable {
    /// Push notifications, as settings allow.
    case push
    /// No push: the app reads its history.
    case pull
}

/// A user's notification settings. Settings shape delivery; they never suppress history.
public struct UserSettings: Sendable, Equatable, Codable {
    /// Master switch for push.
    public var enabled: Bool
    /// Per-type push opt-out: `false` means no push for that type.
    public var types: [String: Bool]
    /// Push, or pull only (the app reads its history; no push is sent).
    public var delivery: DeliveryPreference
    /// During quiet hours alerts arrive silently, as information.
    public var quietHours: QuietHours?

    /// The defaults: push on for every type, no quiet hours.
    public init(enabled: Bool = true, types: [String: Bool] = [:], delivery: DeliveryPreference = .push, quietHours: QuietHours? = nil) {
        self.enabled = enabled
        self.types = types
        self.delivery = delivery
        self.quietHours = quietHours
    }

    enum CodingKeys: String, CodingKey {
        case enabled, types, delivery
        case quietHours = "quiet_hours"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        enabled = try container.decodeIfPresent(Bool.self, forKey: .enabled) ?? true
        types = try container.decodeIfPresent([String: Bool].self, forKey: .types) ?? [:]
        delivery = try container.decodeIfPresent(DeliveryPreference.self, forKey: .delivery) ?? .push
        quietHours = try container.decodeIfPresent(QuietHours.self, forKey: .quietHours)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(enabled, forKey: .enabled)
        try container.encode(types, forKey: .types)
        try container.encode(delivery, forKey: .delivery)
        try container.encode(quietHours, forKey: .quietHours) // explicit null: apps see the key
    }
}

/// `{"start":"22:00","end":"07:00","tz":"America/Toronto"}`; the window may wrap midnight.
public struct QuietHours: Sendable, Equatable, Codable {
    /// `HH:MM`, when the window opens (24-hour clock).
    public var start: String
    /// `HH:MM`, when it closes; earlier than `start` for a window over midnight.
    public var end: String
    /// An IANA zone name (`Europe/Paris`); the window is read in it.
    public var tz: String

    /// A window as given; ``validate(field:)`` checks it.
    public init(start: String, end: String, tz: String) {
        self.start = start
        self.end = end
        self.tz = tz
    }

    /// - Throws: a 422 naming the field for a malformed time, an empty window or an unknown zone.
    public func validate(field: String = "quiet_hours") throws {
        guard let startMinute = Self.minuteOfDay(start) else {
            throw HeraldError.invalidField("\(field).start", "must be a time HH:MM, 00:00-23:59")
        }
        guard let endMinute = Self.minuteOfDay(end) else {
            throw HeraldError.invalidField("\(field).end", "must be a time HH:MM, 00:00-23:59")
        }
        guard startMinute != endMinute else {
            throw HeraldError.invalidField(field, "start and end must differ")
        }
        guard TimeZone(identifier: tz) != nil else {
            throw HeraldError.invalidField("\(field).tz", "must be an IANA time zone such as America/Toronto")
        }
    }

    /// Whether `date` falls inside the window, in the window's own time zone.
    public func contains(_ date: Date) -> Bool {
        guard let startMinute = Self.minuteOfDay(start), let endMinute = Self.minuteOfDay(end),
            let zone = TimeZone(identifier: tz)
        else { return false }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let parts = calendar.dateComponents([.hour, .minute], from: date)
        let minute = (parts.hour ?? 0) * 60 + (parts.minute ?? 0)
        if startMinute < endMinute {
            return minute >= startMinute && minute < endMinute
        }
        return minute >= startMinute || minute < endMinute
    }

    static func minuteOfDay(_ text: String) -> Int? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        // Digits only: Int() also reads "+1" and "-0", which are not times.
        guard parts.count == 2, parts.allSatisfy({ $0.utf8.count == 2 && $0.utf8.allSatisfy { (48...57).contains($0) } }),
            let hour = Int(parts[0]), let minute = Int(parts[1]),
            (0..<24).contains(hour), (0..<60).contains(minute)
        else { return nil }
        return hour * 60 + minute
    }
}

/// A `PATCH /api/notifications/settings` body: only the fields present change.
/// `"quiet_hours": null` removes quiet hours; `types` entries merge into the existing map.
public struct SettingsPatch: Decodable, Sendable {
    /// The master switch, when given.
    public var enabled: Bool?
    /// Per-type entries to merge into the stored map, when given.
    public var types: [String: Bool]?
    /// `push` or `pull`, when given (checked when applied).
    public var delivery: String?
    /// Outer nil: not given. Inner nil: given as null.
    public var quietHours: QuietHours??

    /// The wire names this body accepts; any other field is refused.
    public static let fieldNames: Set<String> = ["enabled", "types", "delivery", "quiet_hours"]

    /// A patch changing only the fields given.
    public init(enabled: Bool? = nil, types: [String: Bool]? = nil, delivery: String? = nil, quietHours: QuietHours?? = nil) {
        self.enabled = enabled
        self.types = types
        self.delivery = delivery
        self.quietHours = quietHours
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: UserSettings.CodingKeys.self)
        enabled = try container.decodeIfPresent(Bool.self, forKey: .enabled)
        types = try container.decodeIfPresent([String: Bool].self, forKey: .types)
        delivery = try container.decodeIfPresent(String.self, forKey: .delivery)
        if container.contains(.quietHours) {
            quietHours = .some(try container.decodeNil(forKey: .quietHours) ? nil : try container.decode(QuietHours.self, forKey: .quietHours))
        }
    }

    /// Checks every value, then applies the patch to `settings`.
    public func apply(to settings: inout UserSettings, types known: NotificationTypes) throws {
        var result = settings
        if let enabled { result.enabled = enabled }
        if let types {
            for (type, _) in types.sorted(by: { $0.key < $1.key }) {
                try known.validate(type, field: "types")
            }
            result.types.merge(types) { _, new in new }
        }
        if let delivery {
            guard let value = DeliveryPreference(rawValue: delivery) else {
                throw HeraldError.invalidField("delivery", "must be 'push' or 'pull'")
            }
            result.delivery = value
        }
        if let quietHours {
            try quietHours?.validate()
            result.quietHours = quietHours
        }
        settings = result
    }
}
