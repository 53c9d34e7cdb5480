public import HeraldStore

/// The card store for the engine Herald stores in.
public enum CardStores {
    /// - Parameter maxPendingEvents: event uploads that may wait for a group commit at once;
    ///   more are refused with a 503 (`server.max_pending_accepts`).
    public static func on(_ storage: some EngineBackedStorage, maxPendingEvents: Int = 10_000) -> any CardStore {
        switch storage.engine {
        case .sqlite(let store): SQLiteCardStore(store: store, maxPendingEvents: maxPendingEvents)
        case .postgres(let store): PostgresCardStore(store: store, maxPendingEvents: maxPendingEvents)
        }
    }
}
