/// The engine beneath a store, for a feature module that keeps one implementation per engine
/// where the two cannot share their SQL (docs/architecture.md, "Feature modules"): the module
/// switches on it once, when the server composes it.
public enum StorageEngine: Sendable {
    case sqlite(SQLiteStore)
    case postgres(PostgresStore)

    /// The modules the store was opened with (``StorageModule``).
    package var modules: StorageModules {
        switch self {
        case .sqlite(let store): store.modules
        case .postgres(let store): store.modules
        }
    }
}

/// A store that names its engine.
public protocol EngineBackedStorage: Sendable {
    var engine: StorageEngine { get }
}

extension SQLiteStore: EngineBackedStorage {
    public var engine: StorageEngine { .sqlite(self) }
}

extension PostgresStore: EngineBackedStorage {
    public var engine: StorageEngine { .postgres(self) }
}
