import Foundation
public import HeraldCards
import HeraldCore
public import HeraldStore
import HeraldTopics
import Testing

/// Every storage engine the conformance suites run against. PostgreSQL runs when the test
/// server from `scripts/test` is up (HERALD_TEST_POSTGRES_URL); each test gets its own database.
public enum StoreKind: String, CaseIterable, CustomStringConvertible, Sendable {
    case sqlite
    case sqliteMemory
    case postgres

    public static var allCases: [StoreKind] {
        [.sqlite, .sqliteMemory] + (PostgresTestDatabase.serverURL == nil ? [] : [.postgres])
    }

    public var description: String { rawValue }

    /// Herald's own storage modules, as the server opens a store with them
    /// (StorageLocation.builtInModules, which this target cannot import).
    public static let heraldModules: [StorageModule] = [.cards, .topics]

    /// A migrated store with `modules` (by default Herald's own, as a server opens it).
    public func make(modules: [StorageModule] = StoreKind.heraldModules) async throws -> any ServerStorage {
        let store: any ServerStorage
        switch self {
        case .sqlite:
            let directory = try TestResources.temporaryDirectory("herald-store")
            store = try SQLiteStore(path: directory.appendingPathComponent("test.sqlite").path, modules: modules)
        case .sqliteMemory:
            store = try SQLiteStore(path: ":memory:", modules: modules)
        case .postgres:
            store = try PostgresStore.patient(url: try await PostgresTestDatabase.create(), modules: modules)
        }
        TestResources.register { await store.close() }
        try await store.migrate()
        return store
    }

    /// A migrated store and the cards module's store on its database.
    public func makeWithCards() async throws -> (storage: any ServerStorage, cards: any CardStore) {
        let storage = try await make()
        return (storage, try CardStores.on(storage))
    }
}

extension PostgresStore {
    /// For conformance tests, which test what is stored, not how long a request may wait for a
    /// connection: on a machine starved by the whole suite, opening a pool's first connections
    /// (a backend forked per connection) has taken longer than the 2 s a request waits, and 15 s
    /// was too short once for 132 seen reports that all wait on one user's row (2026-11-27).
    public static let patientAcquireTimeout = Duration.seconds(60)

    /// A store on `url` that waits ``patientAcquireTimeout`` for a connection.
    public static func patient(url: String, modules: [StorageModule] = StoreKind.heraldModules) throws -> PostgresStore {
        try PostgresStore(url: url, acquireTimeout: patientAcquireTimeout, modules: modules)
    }
}
