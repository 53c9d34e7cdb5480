public import Foundation
public import HeraldFeedRules

/// A message in the anonymous pull feed (docs/feed.md).
public struct FeedMessage: Sendable, Equatable {
    /// `"CA"` in `targetRegions` means every region.
    public static let everyRegion = FeedAudience.everyRegion

    /// The message's id.
    public var id: ObjectID
    /// Its title.
    public var title: String
    /// Its text.
    public var body: String
    /// Where opening it leads; nil for nowhere.
    public var url: String?
    /// When it was posted (the order apps show).
    public var postedAt: Date
    /// When it leaves the feed.
    public var expiresAt: Date
    /// Higher first.
    public var priority: Int
    /// The regions it is for; ``everyRegion`` for all.
    public var targetRegions: [String]
    /// A semver range; nil means every version.
    public var targetVersion: String?

    /// A message as stored.
    public init(
        id: ObjectID, title: String, body: String, url: String?, postedAt: Date, expiresAt: Date, priority: Int,
        targetRegions: [String], targetVersion: String?
    ) {
        self.id = id
        self.title = title
        self.body = body
        self.url = url
        self.postedAt = postedAt
        self.expiresAt = expiresAt
        self.priority = priority
        self.targetRegions = targetRegions
        self.targetVersion = targetVersion
    }
}

/// The pull feed's messages.
public protocol FeedStore: Sendable {
    /// Adds a message; adding the same id again changes nothing.
    func addFeedMessage(_ message: FeedMessage) async throws
    /// - Returns: false when there was no such message.
    func deleteFeedMessage(id: ObjectID) async throws -> Bool
    /// Every stored message, expired ones included, oldest first.
    func feedMessages() async throws -> [FeedMessage]
    /// Deletes messages that expired before `date`. - Returns: how many.
    func purgeFeedMessages(expiredBefore date: Date) async throws -> Int
    /// Calls `changed` whenever any process adds or deletes feed messages, until the task is
    /// cancelled. A store that only one process writes (SQLite) returns at once.
    func watchFeedChanges(_ changed: @escaping @Sendable () -> Void) async throws
}

extension FeedStore {
    /// Returns at once: one process writes the store, and it knows its own changes.
    public func watchFeedChanges(_ changed: @escaping @Sendable () -> Void) async throws {}
}

/// Who is asking the feed: both filters are optional.
public struct FeedQuery: Sendable, Hashable {
    /// Kept as ``RegionCode/folded(_:)`` gives it, so `qc` and `QC` are one query (and one
    /// cached document).
    public var region: String? {
        didSet { region = region.map(RegionCode.folded) }
    }
    /// The app version asking; nil skips the version filter (every message's range passes).
    public var version: SemanticVersion?

    /// A query; the region is folded as ``region`` keeps it.
    public init(region: String? = nil, version: SemanticVersion? = nil) {
        self.region = region.map(RegionCode.folded)
        self.version = version
    }
}
