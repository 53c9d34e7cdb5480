public import Foundation
public import HeraldFeedRules
import Synchronization

/// The feed as served: an in-memory copy rebuilt when messages change, so no request touches
/// the database. Eligibility and order (docs/feed.md) are ``FeedEligibility``'s, the code
/// HeraldKit runs on devices.
public final class FeedSnapshot: Sendable {
    struct Entry: Sendable, FeedCandidate {
        var message: FeedMessage
        /// Parsed once, when the snapshot is loaded.
        let feedAudience: FeedAudience

        init(_ message: FeedMessage) {
            self.message = message
            feedAudience = FeedAudience(targetRegions: message.targetRegions, targetVersion: message.targetVersion)
        }

        var feedID: ObjectID { message.id }
        var feedPriority: Int { message.priority }
        var feedPostedAt: Date { message.postedAt }
        var feedExpiresAt: Date { message.expiresAt }
    }

    private struct State {
        var entries: [Entry] = []
        var generation: UInt64 = 0
        /// The ticket of the read the entries came from.
        var read: UInt64 = 0
    }

    private let state = Mutex(State())
    /// Numbers reads in the order they begin: reloads run concurrently (each change to the feed
    /// starts one) and may finish in any order, and only a read that began later has seen every
    /// change an earlier one has.
    private let tickets = Atomic<UInt64>(0)
    /// Told after each reload, for live streams to check whether what they serve changed.
    public let reloads = Broadcaster<Void>()

    /// An empty snapshot, until the first ``reload(from:)``.
    public init() {}

    /// Replaces the snapshot with the store's current messages, unless a read that began after
    /// this one has replaced it already. When it returns, the snapshot holds every change
    /// committed before it was called.
    public func reload(from store: any FeedStore) async throws {
        let ticket = tickets.add(1, ordering: .relaxed).newValue
        let messages = try await store.feedMessages()
        let fresh = messages.map(Entry.init)
        let replaced = state.withLock { state in
            guard ticket > state.read else { return false }
            state = State(entries: fresh, generation: state.generation &+ 1, read: ticket)
            return true
        }
        if replaced { reloads.send(()) }
    }

    /// Counts reloads: what ``eligible(at:for:)`` answers changes only with it, or as time passes
    /// a message's `expires_at`.
    public var generation: UInt64 { state.withLock { $0.generation } }

    /// Every eligible message, highest priority first, then oldest `posted_at`.
    public func eligible(at now: Date, for query: FeedQuery) -> [FeedMessage] {
        FeedEligibility.eligible(state.withLock { $0.entries }, at: now, region: query.region, version: query.version).map(\.message)
    }

    /// The one message to display now: eligible and not yet read.
    public func next(at now: Date, for query: FeedQuery, read: Set<String>) -> FeedMessage? {
        eligible(at: now, for: query).first { !read.contains($0.id.hex) }
    }
}
