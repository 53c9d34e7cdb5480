public import Foundation

/// A message in the anonymous pull feed (docs/feed.md).
public struct FeedMessage: Sendable, Equatable {
    /// `"CA"` in `targetRegions` means every region.
    public static let everyRegion = "CA"

    public var id: ObjectID
    public var title: String
    public var body: String
    public var url: String?
    public var postedAt: Date
    public var expiresAt: Date
    /// Higher first.
    public var priority: Int
    public var targetRegions: [String]
    /// A semver range; nil means every version.
    public var targetVersion: String?

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
    public func watchFeedChanges(_ changed: @escaping @Sendable () -> Void) async throws {}
}

/// Who is asking the feed: both filters are optional.
public struct FeedQuery: Sendable, Hashable {
    /// Kept as ``RegionCode/folded(_:)`` gives it, so `qc` and `QC` are one query (and one
    /// cached document).
    public var region: String? {
        didSet { region = region.map(RegionCode.folded) }
    }
    public var version: SemanticVersion?

    public init(region: String? = nil, version: SemanticVersion? = nil) {
        self.region = region.map(RegionCode.folded)
        self.version = version
    }
}
