public import HeraldCore

extension SinkFactory {
    /// The history sink, which every server has under the name `history`.
    public static let history = SinkFactory(type: "history") { context in
        HistorySink(store: context.history)
    }
}
