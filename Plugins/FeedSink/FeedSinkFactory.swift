public import HeraldCore

extension SinkFactory {
    /// The pull-feed sink, which every server has under the name `feed`.
    public static let feed = SinkFactory(type: "feed") { context in
        FeedSink(store: context.feedStore, snapshot: context.feed)
    }
}
