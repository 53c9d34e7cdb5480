public import Foundation

/// How a notification is shown: a visible push, or silent data stored in-app.
public enum Distribution: String, Sendable, Codable, CaseIterable {
    case alert
    case information
}

/// Who a notification is for. Exactly one kind per notification.
public enum NotificationTarget: Sendable, Equatable {
    case users([String])
    case topic(String)
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
    public var regions: [String]
    public var version: String?
    public var expiresAt: Date?

    public init(regions: [String] = [FeedMessage.everyRegion], version: String? = nil, expiresAt: Date? = nil) {
        self.regions = regions
        self.version = version
        self.expiresAt = expiresAt
    }
}

public enum TargetKind: String, Sendable, CaseIterable {
    case users = "user_ids"
    case topic
    case audience
    case broadcast
}

/// `{"all":true}` or any of tier, group and user ids, OR-ed.
public struct Audience: Sendable, Equatable, Codable {
    public var all: Bool
    public var tierIDs: [String]
    public var groupIDs: [String]
    public var userIDs: [String]

    public init(all: Bool = false, tierIDs: [String] = [], groupIDs: [String] = [], userIDs: [String] = []) {
        self.all = all
        self.tierIDs = tierIDs
        self.groupIDs = groupIDs
        self.userIDs = userIDs
    }
}

/// A validated notification as Herald stores and routes it.
public struct HeraldNotification: Sendable, Equatable {
    public var id: ObjectID
    public var type: String
    public var title: String
    public var body: String
    /// Absolute URL, or nil when the notification refers to no resource.
    public var url: String?
    public var data: [String: String]
    public var timestamp: Date
    public var distribution: Distribution
    public var priority: Int
    public var expiresAt: Date?
    public var collapseKey: String?
    public var idempotencyKey: String?
    public var target: NotificationTarget

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

    public func isExpired(at now: Date) -> Bool {
        guard let expiresAt else { return false }
        return expiresAt <= now
    }
}
