import HeraldCore
import Logging
import ServiceLifecycle

/// Wakes this process's live streams when storage commits a change they serve (in any process,
/// on PostgreSQL) and when the feed snapshot reloads.
package struct LiveUpdates: Service {
    let store: any ChangeStore
    let feed: FeedSnapshot
    let streams: LiveStreams
    let logger: Logger

    package init(store: any ChangeStore, feed: FeedSnapshot, streams: LiveStreams, logger: Logger) {
        self.store = store
        self.feed = feed
        self.streams = streams
        self.logger = logger
    }

    package func run() async throws {
        await withGracefulShutdownHandler {
            await cancelWhenGracefulShutdown {
                await withTaskGroup(of: Void.self) { group in
                    group.addTask { await self.watchStore() }
                    group.addTask { await self.feed.reloads.listen { [streams] in streams.postAll(.feed) } }
                }
            }
        } onGracefulShutdown: {
            streams.closeAll()
        }
    }

    private func watchStore() async {
        let lookAgain = { [streams] in
            // Whatever was committed while nobody listened: every stream looks again.
            streams.postAll(.history)
            streams.postAll(.content)
            streams.postAll(.inbox)
        }
        await keepWatching("storage's change notifications for live streams", logger: logger, afterFailure: lookAgain) {
            try await store.watchChanges { [streams] change in
                switch change {
                case .history(let users): streams.post(.history, users: users)
                case .content: streams.postAll(.content)
                case .attributes(let users): streams.post(.content, users: users)
                case .inbox(let users): streams.post(.inbox, users: users)
                // Streams hear of the feed when its snapshot reloads (FeedMaintenance reloads on this).
                case .feed: break
                }
            }
        }
    }
}
