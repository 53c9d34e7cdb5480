import Foundation
public import HeraldCore

/// Publishes `broadcast` notifications into the anonymous pull feed (docs/feed.md): no device token
/// leaves the user's phone. The feed message takes the notification's id (so a retried delivery
/// publishes it once), title, body, url and priority; regions, version range and expiry come
/// from the broadcast target (expiry falls back to the notification's, then to seven days).
public struct FeedSink: NotificationSink {
    public let name = "feed"
    public let capabilities: SinkCapabilities = .broadcast
    private let store: any FeedStore
    private let snapshot: FeedSnapshot?

    /// - Parameters:
    ///   - store: where feed messages are stored.
    ///   - snapshot: the served feed, reloaded after each publish.
    public init(store: any FeedStore, snapshot: FeedSnapshot? = nil) {
        self.store = store
        self.snapshot = snapshot
    }

    public func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] {
        var outcomes: [DeliveryOutcome] = []
        for delivery in batch {
            let n = delivery.notification
            guard case .broadcast(let options) = n.target else {
                outcomes.append(.failed(reason: "the feed sink publishes broadcast notifications only"))
                continue
            }
            let message = FeedMessage(
                id: n.id, title: n.title, body: n.body, url: n.url, postedAt: n.goesOutAt,
                expiresAt: options.expiresAt ?? n.expiresAt ?? n.goesOutAt.addingTimeInterval(NotificationValidator.defaultBroadcastLifetime),
                priority: n.priority, targetRegions: options.regions, targetVersion: options.version
            )
            do {
                try await store.addFeedMessage(message)
                outcomes.append(.delivered)
            } catch {
                outcomes.append(.retry(after: nil, reason: "feed write failed: \(error)"))
            }
        }
        if let snapshot, outcomes.contains(.delivered) {
            try? await snapshot.reload(from: store)
        }
        return outcomes
    }
}
