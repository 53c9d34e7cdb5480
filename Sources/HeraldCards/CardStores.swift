import HeraldCore
public import HeraldStore

/// The card store for the engine Herald stores in.
public enum CardStores {
    /// - Parameter maxPendingEvents: event uploads that may wait for a group commit at once;
    ///   more are refused with a 503 (`server.max_pending_accepts`).
    /// - Throws: when the store was opened without ``HeraldStore/StorageModule/cards``, whose
    ///   erasure steps delete a user's cards and events: a card store on it would keep them
    ///   after the user is erased.
    public static func on(_ storage: some EngineBackedStorage, maxPendingEvents: Int = 10_000) throws -> any CardStore {
        let engine = storage.engine
        guard engine.modules.contains(named: StorageModule.cards.name) else {
            throw HeraldError(
                .internal, code: "cards_module_missing",
                "the store was opened without StorageModule.cards, so erasing a user would keep their cards and events; open it with StorageLocation.builtInModules"
            )
        }
        switch engine {
        case .sqlite(let store): return SQLiteCardStore(store: store, maxPendingEvents: maxPendingEvents)
        case .postgres(let store): return PostgresCardStore(store: store, maxPendingEvents: maxPendingEvents)
        }
    }
}
