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
        switch storage.engine {
        case .sqlite(let store):
            try requireErasure(in: store.modules)
            return SQLiteCardStore(store: store, maxPendingEvents: maxPendingEvents)
        case .postgres(let store):
            try requireErasure(in: store.modules)
            return PostgresCardStore(store: store, maxPendingEvents: maxPendingEvents)
        }
    }

    private static func requireErasure(in modules: StorageModules) throws {
        guard modules.modules.contains(where: { $0.name == StorageModule.cards.name }) else {
            throw HeraldError(
                .internal, code: "cards_module_missing",
                "the store was opened without StorageModule.cards, so erasing a user would keep their cards and events; open it with StorageLocation.builtInModules"
            )
        }
    }
}
