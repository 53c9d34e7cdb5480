public import Foundation
import HeraldFeedRules

/// Checks a ``NotificationSubmission`` against the rules of docs/routing.md and builds the ``HeraldNotification``.
public struct NotificationValidator: Sendable {
    /// Users a notification's `user_ids` may name.
    public static let maxRecipients = 1_000
    /// Ids an audience may list per kind (tiers, groups, users); the users they match are unbounded.
    public static let maxAudienceIDs = 1_000
    /// Lengths count Unicode code points, as JSON Schema's `maxLength` in openapi.yaml does.
    public static let maxTitleLength = 1_024
    /// Longest `body`, in code points.
    public static let maxBodyLength = 8_192
    /// Priorities a notification or feed message may have.
    public static let priorityRange = -1_000_000...1_000_000
    /// Pairs `data` may hold.
    public static let maxDataEntries = 100
    /// Longest `collapse_key` and `idempotency_key`, in code points.
    public static let maxKeyLength = 255

    /// The types a notification may have.
    public var types: NotificationTypes
    /// Resolves a relative `url` against the public base URL.
    public var resources: ResourceResolver

    /// A validator accepting `types` and resolving URLs with `resources`.
    public init(types: NotificationTypes, resources: ResourceResolver) {
        self.types = types
        self.resources = resources
    }

    /// - Returns: the notification as accepted, with `id` and `now` as its acceptance time.
    /// - Throws: a ``HeraldError`` naming the first field that breaks a rule.
    public func validate(_ submission: NotificationSubmission, id: ObjectID, now: Date) throws -> HeraldNotification {
        guard let type = submission.type else { throw HeraldError.missingField("type") }
        try types.validate(type)
        guard let title = submission.title else { throw HeraldError.missingField("title") }
        guard title.unicodeScalars.count <= Self.maxTitleLength else {
            throw HeraldError.invalidField("title", "must be at most \(Self.maxTitleLength) characters")
        }
        let body = submission.body ?? ""
        guard body.unicodeScalars.count <= Self.maxBodyLength else {
            throw HeraldError.invalidField("body", "must be at most \(Self.maxBodyLength) characters")
        }

        let distribution: Distribution
        if let raw = submission.distribution {
            guard let value = Distribution(rawValue: raw) else {
                throw HeraldError.invalidField("distribution", "must be 'alert' or 'information'")
            }
            distribution = value
        } else {
            distribution = .alert
        }
        if distribution == .alert && title.isEmpty && body.isEmpty {
            throw HeraldError.invalidField("title", "must not be empty for an alert (give a title or a body)")
        }

        let data = submission.data ?? [:]
        guard data.count <= Self.maxDataEntries else {
            throw HeraldError.invalidField("data", "must have at most \(Self.maxDataEntries) entries")
        }
        for key in data.keys where key.isEmpty {
            throw HeraldError.invalidField("data", "keys must not be empty")
        }

        let priority = submission.priority ?? 0
        try Self.checkPriority(priority)

        var expiresAt: Date?
        if let raw = submission.expiresAt {
            guard let date = Timestamp.parse(raw) else {
                throw HeraldError.invalidField("expires_at", "must be an RFC 3339 timestamp such as 2030-01-01T00:00:00Z")
            }
            guard date > now else { throw HeraldError.invalidField("expires_at", "is in the past") }
            expiresAt = date
        }
        try Self.checkKey(submission.collapseKey, field: "collapse_key")
        try Self.checkKey(submission.idempotencyKey, field: "idempotency_key")
        let digest = try Self.digest(of: submission)

        var notification = HeraldNotification(
            id: id, type: type, title: title, body: body,
            url: try resources.resolve(submission.url),
            data: data, timestamp: now, distribution: distribution, priority: priority,
            expiresAt: expiresAt, collapseKey: submission.collapseKey,
            idempotencyKey: submission.idempotencyKey, target: try target(of: submission, now: now)
        )
        (notification.digestKey, notification.digestWindow) = (digest?.key, digest?.seconds)
        return notification
    }

    /// `digest_key` with its `digest_window` (docs/timing.md); nil for neither.
    /// - Throws: 422 naming the field for one without the other, a key that is empty, too long
    ///   or has control characters, or a window that is 0, longer than a week or not a duration;
    ///   a broadcast has no users to fold for.
    static func digest(of submission: NotificationSubmission) throws -> (key: String, seconds: Int64)? {
        guard submission.digestKey != nil || submission.digestWindow != nil else { return nil }
        guard let key = submission.digestKey else { throw HeraldError.invalidField("digest_key", "is required with digest_window") }
        try checkKey(key, field: "digest_key")
        guard let window = submission.digestWindow else { throw HeraldError.invalidField("digest_window", "is required with digest_key") }
        guard let seconds = window.seconds else {
            throw HeraldError.invalidField("digest_window", "must be a duration of 1 second to 7 days, such as \"90s\", \"10m\", \"1h\" or a number of seconds")
        }
        guard submission.broadcast == nil else { throw HeraldError.invalidField("digest_key", "is not for a broadcast, whose feed readers are anonymous") }
        return (key, seconds)
    }

    /// When a send with `send_at` goes out (docs/timing.md): nil when it has none, or one not
    /// after `now` (a time in the past means now).
    /// - Throws: 422 naming `send_at` for text that is not an RFC 3339 time with an offset, or
    ///   a time more than a year after `now`; 422 naming `expires_at` (or
    ///   `broadcast.expires_at`) when the notification would expire before it goes out.
    public func scheduledInstant(of submission: NotificationSubmission, now: Date) throws -> Date? {
        guard let text = submission.sendAt else { return nil }
        guard let instant = Timestamp.parse(text) else {
            throw HeraldError.invalidField("send_at", "must be an RFC 3339 time with an offset, such as 2030-01-01T09:00:00+01:00")
        }
        guard instant > now else { return nil }
        guard let latest = Self.latestSchedule(after: now), instant <= latest else {
            throw HeraldError.invalidField("send_at", "must be at most a year ahead")
        }
        if let expires = submission.expiresAt.flatMap(Timestamp.parse), expires <= instant {
            throw HeraldError.invalidField("expires_at", "is not after send_at: the notification would expire before it goes out")
        }
        if let expires = submission.broadcast?.expiresAt.flatMap(Timestamp.parse), expires <= instant {
            throw HeraldError.invalidField("broadcast.expires_at", "is not after send_at: the message would leave the feed before it is posted")
        }
        return instant
    }

    /// How far ahead a send may be scheduled (`send_at`, `send_at_local`): a year after `now`.
    static func latestSchedule(after now: Date) -> Date? {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        return calendar.date(byAdding: .year, value: 1, to: now)
    }

    /// The wall-clock time of a send in each recipient's own zone (`send_at_local`,
    /// docs/timing.md); nil when it has none.
    /// - Throws: 422 naming `send_at_local` for text that is neither `HH:MM` nor
    ///   `YYYY-MM-DDTHH:MM`, with `send_at` too, for a broadcast (the anonymous feed has no
    ///   recipients' zones), or for a date more than a year ahead.
    public func localSendTime(of submission: NotificationSubmission, now: Date) throws -> LocalSendTime? {
        guard let text = submission.sendAtLocal else { return nil }
        guard let local = LocalSendTime(text) else {
            throw HeraldError.invalidField("send_at_local", "must be a wall-clock time HH:MM (such as 09:00) or a date and time YYYY-MM-DDTHH:MM")
        }
        guard submission.sendAt == nil else {
            throw HeraldError.invalidField("send_at_local", "cannot be given with send_at: give one instant for everyone, or one wall-clock time")
        }
        guard submission.broadcast == nil else {
            throw HeraldError.invalidField("send_at_local", "is not for a broadcast, whose feed readers are anonymous: use send_at")
        }
        if let earliest = local.earliestInstant, let latest = Self.latestSchedule(after: now), earliest > latest {
            throw HeraldError.invalidField("send_at_local", "must be at most a year ahead")
        }
        return local
    }

    /// How long a broadcast stays in the feed when neither it nor the notification says.
    public static let defaultBroadcastLifetime: TimeInterval = 7 * 24 * 3600

    static func options(_ target: BroadcastTarget, now: Date) throws -> BroadcastOptions {
        var options = BroadcastOptions()
        if let regions = target.regions {
            guard !regions.isEmpty else { throw HeraldError.invalidField("broadcast.regions", "must name at least one region (\"CA\" means every region)") }
            for (index, region) in regions.enumerated() where region.isEmpty || region.unicodeScalars.count > 16 {
                throw HeraldError.invalidField("broadcast.regions[\(index)]", "must be a region code of 1-16 characters")
            }
            options.regions = regions
        }
        if let version = target.version {
            do {
                _ = try VersionRange(version)
            } catch {
                throw HeraldError.invalidField("broadcast.version", "'\(version)' is not a semver range (use forms like >=2.1.0 <3, ^1.4, 1.x)")
            }
            options.version = version
        }
        if let text = target.expiresAt {
            guard let date = Timestamp.parse(text) else { throw HeraldError.invalidField("broadcast.expires_at", "must be an RFC 3339 timestamp") }
            guard date > now else { throw HeraldError.invalidField("broadcast.expires_at", "is in the past") }
            options.expiresAt = date
        }
        return options
    }

    private func target(of submission: NotificationSubmission, now: Date) throws -> NotificationTarget {
        var targets: [NotificationTarget] = []
        if let ids = submission.userIDs { targets.append(.users(ids)) }
        if let topic = submission.topic { targets.append(.topic(topic)) }
        if let audience = submission.audience { targets.append(.audience(audience)) }
        if let broadcast = submission.broadcast { targets.append(.broadcast(try Self.options(broadcast, now: now))) }
        guard targets.count == 1, let target = targets.first else {
            throw HeraldError(
                .unprocessable, code: targets.isEmpty ? "missing_target" : "ambiguous_target",
                "give exactly one target: 'user_ids', 'topic', 'audience' or 'broadcast'"
            )
        }
        switch target {
        case .users(let ids):
            guard !ids.isEmpty else { throw HeraldError.invalidField("user_ids", "must name at least one user") }
            var unique: [String] = []
            var seen = Set<String>()
            for (index, id) in ids.enumerated() {
                try UserID.validate(id, field: "user_ids[\(index)]")
                if seen.insert(id).inserted { unique.append(id) }
            }
            guard unique.count <= Self.maxRecipients else {
                throw HeraldError.invalidField("user_ids", "must name at most \(Self.maxRecipients) users; use a topic or an audience for more")
            }
            return .users(unique)
        case .topic(let key):
            guard TopicKey(key) != nil else {
                throw HeraldError.invalidField("topic", "must be a topic_key: channelId-areaId-subjectId")
            }
            return target
        case .broadcast:
            return target
        case .audience(let audience):
            guard audience.all || !audience.tierIDs.isEmpty || !audience.groupIDs.isEmpty || !audience.userIDs.isEmpty else {
                throw HeraldError.invalidField("audience", "names nobody: give {\"all\":true} or any of tier_ids, group_ids, user_ids")
            }
            for (field, ids) in [("tier_ids", audience.tierIDs), ("group_ids", audience.groupIDs), ("user_ids", audience.userIDs)] {
                guard ids.count <= Self.maxAudienceIDs else {
                    throw HeraldError.invalidField("audience.\(field)", "must have at most \(Self.maxAudienceIDs) entries")
                }
                for (index, id) in ids.enumerated() { try UserID.validate(id, field: "audience.\(field)[\(index)]") }
            }
            return target
        }
    }

    static func checkPriority(_ priority: Int) throws {
        guard priorityRange.contains(priority) else {
            throw HeraldError.invalidField("priority", "must be between \(priorityRange.lowerBound) and \(priorityRange.upperBound)")
        }
    }

    private static func checkKey(_ key: String?, field: String) throws {
        guard let key else { return }
        guard !key.isEmpty, key.unicodeScalars.count <= maxKeyLength else {
            throw HeraldError.invalidField(field, "must be 1-\(maxKeyLength) characters")
        }
        // A key travels as an HTTP header (APNs' apns-collapse-id), where a control character
        // is refused at every send: accepting it would answer 202 for a push that can never go.
        guard !key.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw HeraldError.invalidField(field, "must not contain control characters")
        }
    }
}
