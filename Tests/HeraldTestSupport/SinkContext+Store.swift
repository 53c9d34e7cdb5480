public import HeraldCore
import HeraldFeed
public import HeraldStore
public import Logging

extension SinkContext {
    /// A context on `store` as the server builds one: its history, and the feed module's store
    /// on its database.
    public init(
        name: String, settings: SinkSettings, store: any ServerStorage, feed: FeedSnapshot, logger: Logger, metrics: HeraldMetrics,
        timestamps: TimestampStyle = .pong
    ) {
        self.init(
            name: name, settings: settings, history: store, feedStore: SharedFeedStore(database: store), feed: feed, logger: logger, metrics: metrics,
            timestamps: timestamps)
    }
}
