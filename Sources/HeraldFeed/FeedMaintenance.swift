import Foundation
public import HeraldCore
import Logging
public import ServiceLifecycle

/// Purges expired feed messages from storage and reloads the feed snapshot on a schedule, and
/// at once when another Herald process changes the feed (PostgreSQL `LISTEN`).
public struct FeedMaintenance: Service {
    let store: any FeedStore
    let snapshot: FeedSnapshot
    let interval: Duration
    let logger: Logger

    public init(store: any FeedStore, snapshot: FeedSnapshot, interval: Duration = .seconds(60), logger: Logger) {
        self.store = store
        self.snapshot = snapshot
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.reloadOnChanges() }
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
                do {
                    try await runOnce()
                } catch _ where Task.isCancelled {
                    break // ending, not a failure
                } catch {
                    logger.warning("feed maintenance failed: \(error)")
                }
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            }
            group.cancelAll()
        }
    }

    /// Reloads the snapshot after each change another process announces; a burst of changes
    /// costs one reload per change seen, never a queue of them.
    private func reloadOnChanges() async {
        let (changes, announce) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // Between a loss and the next watch, the schedule still reloads.
                await keepWatching("the feed's change notifications", logger: logger) {
                    try await store.watchFeedChanges { announce.yield() }
                }
                announce.finish()
            }
            for await _ in changes {
                do { try await snapshot.reload(from: store) } catch { logger.warning("feed reload failed: \(error)") }
            }
        }
    }

    /// Purges what has expired and reloads the snapshot.
    public func runOnce(now: Date = Date()) async throws {
        let purged = try await store.purgeFeedMessages(expiredBefore: now)
        if purged > 0 { logger.info("purged \(purged) expired feed messages") }
        try await snapshot.reload(from: store)
    }
}
