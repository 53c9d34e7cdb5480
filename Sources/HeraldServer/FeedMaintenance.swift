import Foundation
public import HeraldCore
import Logging
public import ServiceLifecycle

/// Purges expired feed messages from storage and reloads the feed snapshot on a schedule
/// (which also picks up messages another Herald process wrote).
public struct FeedMaintenance: Service {
    let store: any HeraldStorage
    let snapshot: FeedSnapshot
    let interval: Duration
    let logger: Logger

    public init(store: any HeraldStorage, snapshot: FeedSnapshot, interval: Duration = .seconds(60), logger: Logger) {
        self.store = store
        self.snapshot = snapshot
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await runOnce()
            } catch {
                logger.warning("feed maintenance failed: \(error)")
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
        }
    }

    /// Purges what has expired and reloads the snapshot.
    public func runOnce(now: Date = Date()) async throws {
        let purged = try await store.purgeFeedMessages(expiredBefore: now)
        if purged > 0 { logger.info("purged \(purged) expired feed messages") }
        try await snapshot.reload(from: store)
    }
}
