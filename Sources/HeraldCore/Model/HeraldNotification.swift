public import Foundation

/// How a notification is shown: a visible push, or silent data stored in-app.
public enum Distribution: String, Sendable, Codable, CaseIterable {
    /// A visible push: a banner with sound.
    case alert
    /// Silent data the app stores; a user in quiet hours gets an alert this way.
    case information
}

/// Who a notification is for. Exactly one kind per notification.
public enum NotificationTarget: Sendable, Equatable {
    /// These users (`user_ids`).
    case users([String])
    /// Every subscriber of a subject (its `topic_key`; docs/topics.md).
    case topic(String)
    /// The users an audience names (docs/routing.md).
    case audience(Audience)
    /// The anonymous pull feed (docs/feed.md), optionally limited to regions and an app-version range.
    case broadcast(BroadcastOptions)

    /// The name routing rules and the API use for this kind of target.
    public var kind: TargetKind {
        switch self {
        case .users: .users
        case .topic: .topic
        case .audience: .audience
        case .broadcast: .broadcast
        }
    }
}

/// Where a broadcast is shown: regions (`"CA"`, the default, is every region), a semver range
/// of app versions (nil: every version), and when it leaves the feed.
public struct BroadcastOptions: Sendable, Equatable, Codable {
    /// Region codes the message is shown in.
    public var regions: [String]
    /// A semver range of app versions, or nil for all.
    public var version: String?
    /// When the message leaves the feed, or nil to keep it.
    public var expiresAt: Date?

    /// Options for a broadcast; by default every region and version, never expiring.
    public init(regions: [String] = [FeedMessage.everyRegion], version: String? = nil, expiresAt: Date? = nil) {
        self.regions = regions
        self.version = version
        self.expiresAt = expiresAt
    }
}

/// The kinds of target, by the names routing rules (`target=`) and the API use.
public enum TargetKind: String, Sendable, CaseIterable {
    /// `user_ids`.
    case users = "user_ids"
    /// `topic`.
    case topic
    /// `audience`.
    case audience
    /// `broadcast`: the pull feed.
    case broadcast
}

/// `{"all":true}` or any of tier, group and user ids, OR-ed.
public struct Audience: Sendable, Equatable, Codable {
    /// Every user Herald knows.
    public var all: Bool
    /// Users whose `tier_id` is one of these.
    public var tierIDs: [String]
    /// Users in any of these groups.
    public var groupIDs: [String]
    /// These users.
    public var userIDs: [String]

    /// Whether only ``userIDs`` are named (no ``all``, tier or group): the recipients are that
    /// list, read without looking at every user Herald knows.
    public var namesUsersOnly: Bool { !all && tierIDs.isEmpty && groupIDs.isEmpty }

    /// Whether it is every user Herald knows and nobody else (``all`` without users named, who
    /// might be unknown): read as the users table alone, without matching each user.
    public var isEveryKnownUser: Bool { all && userIDs.isEmpty }

    /// An audience; empty names nobody.
    public init(all: Bool = false, tierIDs: [String] = [], groupIDs: [String] = [], userIDs: [String] = []) {
        self.all = all
        self.tierIDs = tierIDs
        self.groupIDs = groupIDs
        self.userIDs = userIDs
    }
}

/// A validated notification as Herald stores and routes it.
public struct HeraldNotification: Sendable, Equatable {
    /// Assigned at accept; time-ordered, 24 hex digits.
    public var id: ObjectID
    /// A built-in type (`comment`, `upvote`, …) or one the operator added (`types.extra`).
    public var type: String
    /// What a visible push shows as its title.
    public var title: String
    /// What a visible push shows under the title.
    public var body: String
    /// Absolute URL, or nil when the notification refers to no resource.
    public var url: String?
    /// The sender's own keys, passed to apps as strings beside Herald's (`id`, `type`, `url`, …).
    public var data: [String: String]
    /// When it was accepted.
    public var timestamp: Date
    /// Visible push or silent data, as sent (a recipient in quiet hours may get it silently:
    /// see ``Delivery/distribution``).
    public var distribution: Distribution
    /// The sender's priority; higher is more urgent.
    public var priority: Int
    /// After this, a push that has not gone out is failed rather than sent late.
    public var expiresAt: Date?
    /// Pushes with the same key replace each other on the device (FCM `collapse_key`, APNs
    /// `apns-collapse-id`, Web Push `Topic`).
    public var collapseKey: String?
    /// The sender's key for a retried request (answered with the first receipt within 24 h).
    public var idempotencyKey: String?
    /// Whom it is for.
    public var target: NotificationTarget
    /// The id of the ``RoutingInputs`` it was routed with, stamped at accept; nil for one
    /// accepted before Herald recorded them, or stored directly by a tool or test.
    public var routingInputs: String?
    /// For a scheduled send (`send_at`, docs/timing.md): the instant it goes out; nil for one
    /// sent as it is accepted.
    public var sendAt: Date?
    /// For a send in each recipient's own time (`send_at_local`, docs/timing.md): the wall-clock
    /// time; each recipient's instant is worked out as the fan-out job pages them.
    public var sendAtLocal: LocalSendTime?
    /// The sender's `digest_key`: its pushes fold with the same key's for the same user
    /// (docs/timing.md); nil for none.
    public var digestKey: String?
    /// The `digest_key` window, in seconds.
    public var digestWindow: Int64?

    /// When it goes out: its ``sendAt``, else its accept time. A broadcast's `posted_at`.
    public var goesOutAt: Date { sendAt ?? timestamp }

    /// A notification as the validator builds it (tests build their own).
    public init(
        id: ObjectID, type: String, title: String, body: String, url: String?, data: [String: String] = [:],
        timestamp: Date, distribution: Distribution = .alert, priority: Int = 0, expiresAt: Date? = nil,
        collapseKey: String? = nil, idempotencyKey: String? = nil, target: NotificationTarget
    ) {
        self.id = id
        self.type = type
        self.title = title
        self.body = body
        self.url = url
        self.data = data
        self.timestamp = timestamp
        self.distribution = distribution
        self.priority = priority
        self.expiresAt = expiresAt
        self.collapseKey = collapseKey
        self.idempotencyKey = idempotencyKey
        self.target = target
    }

    /// Whether ``expiresAt`` has passed at `now`.
    public func isExpired(at now: Date) -> Bool {
        guard let expiresAt else { return false }
        return expiresAt <= now
    }
}
