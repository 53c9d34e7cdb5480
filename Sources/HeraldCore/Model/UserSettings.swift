public import Foundation

/// Whether a user wants push at all, or prefers to pull from history.
public enum DeliveryPreference: String, Sendable, Codable {
    /// Push notifications, as settings allow.
    case push
    /// No push: the app reads its history.
    case pull
}

/// A user's notification settings. Settings shape delivery; they never suppress history.
///
/// `types` is Pong's map: a type's push switch. `preferences` holds the other channels' choices
/// per type, and `types.<t>` and `preferences.<t>.push` are one setting seen two ways: it is
/// kept in `types`, and the JSON shows it in both (docs/routing.md, "Channels and preferences").
public struct UserSettings: Sendable, Equatable, Codable {
    /// The master switch: off, no user-facing channel but history delivers (critical types do).
    public var enabled: Bool
    /// Per-type push switch: `false` means no push for that type.
    public var types: [String: Bool]
    /// Per-channel switches (`{"chat": false}`), for every type the user did not choose alone.
    public var channels: [String: Bool]
    /// Per type, per channel other than push (`{"comment": {"chat": false}}`); push is `types`.
    public var preferences: [String: [String: Bool]]
    /// Push, or pull only (the app reads its history; no push is sent).
    public var delivery: DeliveryPreference
    /// During quiet hours alerts arrive silently, as information.
    public var quietHours: QuietHours?
    /// The user's IANA time zone (`Europe/Paris`): quiet hours without a `tz` are read in it
    /// (docs/timing.md); nil for none given (the server's `scheduling.default_timezone`).
    public var timezone: String?

    /// Settings as given; by default push on for every type, no quiet hours. `preferences` may
    /// hold push entries: they are `types`' (which wins where both name a type).
    public init(
        enabled: Bool = true, types: [String: Bool] = [:], channels: [String: Bool] = [:], preferences: [String: [String: Bool]] = [:],
        delivery: DeliveryPreference = .push, quietHours: QuietHours? = nil, timezone: String? = nil
    ) {
        self.enabled = enabled
        self.types = types
        self.channels = channels
        self.preferences = [:]
        self.delivery = delivery
        self.quietHours = quietHours
        self.timezone = timezone
        // `types` is the push choice: a push entry in `preferences` is the same setting, and
        // counts only for a type `types` leaves out.
        for (type, choices) in preferences {
            for (channel, on) in choices where !(channel == SinkChannel.push.name && types[type] != nil) {
                setChoice(on, type: type, channel: channel)
            }
        }
    }

    /// The user's own choice for `type` on `channel`, nil when they made none.
    public func choice(type: String, channel: String) -> Bool? {
        channel == SinkChannel.push.name ? types[type] : preferences[type]?[channel]
    }

    /// Records the user's choice for `type` on `channel` (push in `types`).
    public mutating func setChoice(_ on: Bool, type: String, channel: String) {
        if channel == SinkChannel.push.name {
            types[type] = on
        } else {
            preferences[type, default: [:]][channel] = on
        }
    }

    /// `preferences` as the JSON shows it: every type's choices, push included.
    public var allPreferences: [String: [String: Bool]] {
        var all = preferences
        for (type, on) in types { all[type, default: [:]][SinkChannel.push.name] = on }
        return all
    }

    /// Whether `date` falls in the user's quiet hours, read in their `tz`, else the user's
    /// ``timezone``, else `defaultZone` (`scheduling.default_timezone`).
    public func inQuietHours(at date: Date, defaultZone: TimeZone = QuietHours.utc) -> Bool {
        quietHours?.contains(date, fallback: timeZone(default: defaultZone)) ?? false
    }

    /// The zone the user's wall-clock times are read in: their ``timezone``, else `defaultZone`
    /// (`scheduling.default_timezone`).
    public func timeZone(default defaultZone: TimeZone) -> TimeZone {
        timezone.flatMap(TimeZone.init(identifier:)) ?? defaultZone
    }

    enum CodingKeys: String, CodingKey {
        case enabled, types, channels, preferences, delivery, timezone
        case quietHours = "quiet_hours"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            enabled: try container.decodeIfPresent(Bool.self, forKey: .enabled) ?? true,
            types: try container.decodeIfPresent([String: Bool].self, forKey: .types) ?? [:],
            channels: try container.decodeIfPresent([String: Bool].self, forKey: .channels) ?? [:],
            preferences: try container.decodeIfPresent([String: [String: Bool]].self, forKey: .preferences) ?? [:],
            delivery: try container.decodeIfPresent(DeliveryPreference.self, forKey: .delivery) ?? .push,
            quietHours: try container.decodeIfPresent(QuietHours.self, forKey: .quietHours),
            timezone: try container.decodeIfPresent(String.self, forKey: .timezone)
        )
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(enabled, forKey: .enabled)
        try container.encode(types, forKey: .types)
        try container.encode(channels, forKey: .channels)
        try container.encode(allPreferences, forKey: .preferences)
        try container.encode(delivery, forKey: .delivery)
        try container.encode(quietHours, forKey: .quietHours) // explicit null: apps see the key
        try container.encode(timezone, forKey: .timezone)
    }
}

/// `{"start":"22:00","end":"07:00","tz":"America/Toronto"}`; the window may wrap midnight.
/// Without `tz` it is read in the user's `timezone` (else the server's default zone).
public struct QuietHours: Sendable, Equatable, Codable {
    /// `HH:MM`, when the window opens (24-hour clock).
    public var start: String
    /// `HH:MM`, when it closes; earlier than `start` for a window over midnight.
    public var end: String
    /// An IANA zone name (`Europe/Paris`); the window is read in it. nil: the user's
    /// ``UserSettings/timezone``, else the server's default (``NotificationRouter/defaultTimeZone``).
    public var tz: String?
    /// `silent` (nil too: alerts arrive as information inside the window) or `hold` (alerts wait
    /// for the window's end, folded into one digest when more than one waited; docs/timing.md).
    public var mode: String?

    /// A window as given; ``validate(field:)`` checks it.
    public init(start: String, end: String, tz: String? = nil, mode: String? = nil) {
        self.start = start
        self.end = end
        self.tz = tz
        self.mode = mode
    }

    /// Whether alerts inside the window wait for its end (`mode: hold`).
    public var holds: Bool { mode == "hold" }

    /// When the window next closes at or after `date`, in its zone (else `fallback`).
    public func end(after date: Date, fallback: TimeZone = QuietHours.utc) -> Date {
        let zone = tz.flatMap { TimeZone(identifier: $0) } ?? fallback
        guard let close = LocalSendTime(end) else { return date }
        return close.instant(in: zone, notBefore: date)
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
        if let tz { try Self.checkZone(tz, field: "\(field).tz") }
        if let mode, mode != "silent", mode != "hold" {
            throw HeraldError.invalidField("\(field).mode", "must be 'silent' (alerts arrive as information) or 'hold' (they wait for the end)")
        }
    }

    /// UTC, the zone of a window and a user that name none.
    public static let utc = TimeZone(identifier: "UTC") ?? TimeZone.current

    /// - Throws: a 422 naming `field` unless `name` is an IANA time zone.
    public static func checkZone(_ name: String, field: String) throws {
        guard name.utf8.count <= 64, TimeZone(identifier: name) != nil else {
            throw HeraldError.invalidField(field, "must be an IANA time zone such as America/Toronto")
        }
    }

    /// Whether `date` falls inside the window, in its own time zone, else in `fallback`.
    public func contains(_ date: Date, fallback: TimeZone = QuietHours.utc) -> Bool {
        guard let startMinute = Self.minuteOfDay(start), let endMinute = Self.minuteOfDay(end) else { return false }
        let zone = tz.map { TimeZone(identifier: $0) } ?? fallback
        guard let zone else { return false }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let parts = calendar.dateComponents([.hour, .minute], from: date)
        let minute = (parts.hour ?? 0) * 60 + (parts.minute ?? 0)
        if startMinute < endMinute {
            return minute >= startMinute && minute < endMinute
        }
        return minute >= startMinute || minute < endMinute
    }

    /// `HH:MM` as `send_at_local` reads it: two digits each, digits only.
    static func minuteOfDay(_ text: String) -> Int? { LocalSendTime.minuteOfDay(text) }
}

/// A `PATCH /api/notifications/settings` body: only the fields present change.
/// `"quiet_hours": null` removes quiet hours; `types`, `channels` and `preferences` entries
/// merge into the stored maps.
public struct SettingsPatch: Decodable, Sendable {
    /// The master switch, when given.
    public var enabled: Bool?
    /// Per-type push entries to merge into the stored map, when given.
    public var types: [String: Bool]?
    /// Per-channel switches to merge, when given.
    public var channels: [String: Bool]?
    /// Per type, per channel choices to merge (push among them), when given.
    public var preferences: [String: [String: Bool]]?
    /// `push` or `pull`, when given (checked when applied).
    public var delivery: String?
    /// Outer nil: not given. Inner nil: given as null.
    public var quietHours: QuietHours??
    /// Outer nil: not given. Inner nil: given as null (no zone: UTC).
    public var timezone: String??

    /// The wire names this body accepts; any other field is refused.
    public static let fieldNames: Set<String> = ["enabled", "types", "channels", "preferences", "delivery", "quiet_hours", "timezone"]

    /// A patch changing only the fields given.
    public init(
        enabled: Bool? = nil, types: [String: Bool]? = nil, channels: [String: Bool]? = nil, preferences: [String: [String: Bool]]? = nil,
        delivery: String? = nil, quietHours: QuietHours?? = nil
    ) {
        self.enabled = enabled
        self.types = types
        self.channels = channels
        self.preferences = preferences
        self.delivery = delivery
        self.quietHours = quietHours
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: UserSettings.CodingKeys.self)
        enabled = try container.decodeIfPresent(Bool.self, forKey: .enabled)
        types = try container.decodeIfPresent([String: Bool].self, forKey: .types)
        channels = try container.decodeIfPresent([String: Bool].self, forKey: .channels)
        preferences = try container.decodeIfPresent([String: [String: Bool]].self, forKey: .preferences)
        delivery = try container.decodeIfPresent(String.self, forKey: .delivery)
        if container.contains(.quietHours) {
            quietHours = .some(try container.decodeNil(forKey: .quietHours) ? nil : try container.decode(QuietHours.self, forKey: .quietHours))
        }
        if container.contains(.timezone) {
            timezone = .some(try container.decodeNil(forKey: .timezone) ? nil : try container.decode(String.self, forKey: .timezone))
        }
    }

    /// Checks every value, then applies the patch to `settings`.
    /// - Parameters:
    ///   - known: the types a choice may name (an unknown one is a 400 `unknown_type`).
    ///   - channels: the channels users choose on this server (``SinkChannel/isChoosable``);
    ///     another is a 422 naming the field.
    ///   - preferences: the operator's critical types, which no user may turn off (a 422).
    public func apply(
        to settings: inout UserSettings, types known: NotificationTypes, channels: [String] = [SinkChannel.push.name],
        preferences: ChannelPreferences = ChannelPreferences()
    ) throws {
        var result = settings
        if let enabled { result.enabled = enabled }
        func checkLock(_ on: Bool, type: String, field: String) throws {
            guard !on, preferences.critical.contains(type) else { return }
            throw HeraldError.invalidField(field, "is locked: the operator made '\(type)' critical, so it is always delivered")
        }
        func checkChannel(_ channel: String, field: String) throws {
            guard !channels.contains(channel) else { return }
            let list = channels.sorted().joined(separator: ", ")
            throw HeraldError.invalidField(field, "names no channel users choose on this server (\(list.isEmpty ? "none" : list))")
        }
        if let types {
            for (type, on) in types.sorted(by: { $0.key < $1.key }) {
                try known.validate(type, field: "types")
                try checkLock(on, type: type, field: "types.\(type)")
            }
            result.types.merge(types) { _, new in new }
        }
        if let channels = self.channels {
            for (channel, _) in channels.sorted(by: { $0.key < $1.key }) { try checkChannel(channel, field: "channels.\(channel)") }
            result.channels.merge(channels) { _, new in new }
        }
        if let preferences = self.preferences {
            for (type, choices) in preferences.sorted(by: { $0.key < $1.key }) {
                try known.validate(type, field: "preferences")
                for (channel, on) in choices.sorted(by: { $0.key < $1.key }) {
                    // Push is chosen here or in `types`, whatever channels are configured.
                    if channel != SinkChannel.push.name { try checkChannel(channel, field: "preferences.\(type).\(channel)") }
                    try checkLock(on, type: type, field: "preferences.\(type).\(channel)")
                    result.setChoice(on, type: type, channel: channel)
                }
            }
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
        if let timezone {
            if let zone = timezone { try QuietHours.checkZone(zone, field: "timezone") }
            result.timezone = timezone
        }
        settings = result
    }
}
