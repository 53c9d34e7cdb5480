public import Foundation

/// Who a feed message is for, parsed once: its regions (``RegionCode/folded(_:)``; nil when one
/// of them is `"CA"`, every region) and its version range (nil for every version).
public struct FeedAudience: Sendable, Equatable {
    /// `"CA"` in a message's regions means every region.
    public static let everyRegion = "CA"

    /// The regions, folded; nil for every region.
    public let regions: Set<String>?
    /// The range an app's version must satisfy; nil for every version.
    public let range: VersionRange?

    /// A message's audience from its `target_regions` and `target_version`. A range that does
    /// not parse admits every version: the server refuses one when a message is posted, so only
    /// a message stored before a parser change could carry one, and hiding it would hide it
    /// from everyone.
    public init(targetRegions: [String], targetVersion: String?) {
        let regions = Set(targetRegions.map(RegionCode.folded))
        self.regions = regions.contains(Self.everyRegion) ? nil : regions
        range = targetVersion.flatMap { try? VersionRange($0) }
    }

    /// Whether an app in `region` at `version` is in the audience; a nil region or version is
    /// not filtered on.
    public func admits(region: String?, version: SemanticVersion?) -> Bool {
        admits(foldedRegion: region.map(RegionCode.folded), version: version)
    }

    /// ``admits(region:version:)`` for a region already folded, as a feed's filter folds it once
    /// for all its messages.
    func admits(foldedRegion region: String?, version: SemanticVersion?) -> Bool {
        if let region, let regions, !regions.contains(region) { return false }
        if let version, let range, !range.isSatisfied(by: version) { return false }
        return true
    }
}

/// A feed message as the rules see it: enough to decide whether it is shown, and in what order.
public protocol FeedCandidate {
    /// The message's id; the last tie-break of the order.
    associatedtype FeedID: Comparable
    /// The message's id.
    var feedID: FeedID { get }
    /// Higher first.
    var feedPriority: Int { get }
    /// Older first, among equal priorities.
    var feedPostedAt: Date { get }
    /// The message is eligible strictly before this instant.
    var feedExpiresAt: Date { get }
    /// Who it is for.
    var feedAudience: FeedAudience { get }
}

/// Which messages an app shows (docs/feed.md "Eligibility"): unexpired, for its region and
/// version, highest priority first, then the oldest, then by id; one message a check.
public enum FeedEligibility {
    /// Every eligible message, in display order.
    public static func eligible<Message: FeedCandidate>(
        _ messages: some Sequence<Message>, at now: Date, region: String?, version: SemanticVersion?
    ) -> [Message] {
        let region = region.map(RegionCode.folded)
        return messages.filter { now < $0.feedExpiresAt && $0.feedAudience.admits(foldedRegion: region, version: version) }.sorted(by: precedes)
    }

    /// The one message to show now: the first eligible one not in `read`.
    public static func next<Message: FeedCandidate>(
        _ messages: some Sequence<Message>, at now: Date, region: String?, version: SemanticVersion?, read: Set<Message.FeedID>
    ) -> Message? where Message.FeedID: Hashable {
        eligible(messages, at: now, region: region, version: version).first { !read.contains($0.feedID) }
    }

    /// Display order: higher priority, then older, then the smaller id.
    public static func precedes<Message: FeedCandidate>(_ a: Message, _ b: Message) -> Bool {
        if a.feedPriority != b.feedPriority { return a.feedPriority > b.feedPriority }
        if a.feedPostedAt != b.feedPostedAt { return a.feedPostedAt < b.feedPostedAt }
        return a.feedID < b.feedID
    }
}
