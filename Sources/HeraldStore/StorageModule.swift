public import Foundation
public import HeraldCore

/// What a feature module keeps in the store's own schema and transactions (docs/architecture.md,
/// "Storage modules"): its tables, what erasing a user removes of them, and what it writes beside
/// a notification's deliveries. The store runs each part itself, on either engine, so a module
/// adds tables and a tally without editing the store.
///
/// ```swift
/// let tally = StorageModule(
///     name: "tally",
///     migrations: [.init("v1-sends", ["CREATE TABLE sends (user_id TEXT PRIMARY KEY, count BIGINT NOT NULL)"])],
///     erasure: [.init { user in SharedStatement("DELETE FROM sends WHERE user_id = $1 RETURNING 1 AS erased", .text(user)) }],
///     whenDeliveriesStored: { stored in
///         stored.deliveries.map { delivery in
///             SharedStatement(
///                 "INSERT INTO sends (user_id, count) VALUES ($1, 1) ON CONFLICT (user_id) DO UPDATE SET count = sends.count + 1",
///                 .text(delivery.userID))
///         }
///     })
/// let store = try SQLiteStore(path: "herald.sqlite", modules: [tally])
/// ```
public struct StorageModule: Sendable {
    /// One step of a module's schema, run once per database after the store's own migrations,
    /// recorded as `<module>/<name>`. Append new ones; never edit one that has shipped.
    public struct Migration: Sendable {
        public let name: String
        public let sqlite: [String]
        public let postgres: [String]

        /// Statements both engines accept as written.
        public init(_ name: String, _ statements: [String]) {
            self.init(name, sqlite: statements, postgres: statements)
        }

        /// Statements that differ by engine (types, indexes one of them lacks).
        public init(_ name: String, sqlite: [String], postgres: [String]) {
            (self.name, self.sqlite, self.postgres) = (name, sqlite, postgres)
        }
    }

    /// One statement of a user's erasure, run in the store's erasure transaction after the
    /// core's rows are gone and before the user's tokens are ended.
    public struct ErasureStep: Sendable {
        /// The statement for a user id.
        public let statement: @Sendable (_ userID: String) -> SharedStatement
        /// Where the rows it returns are counted in the erasure's answer; nil counts nothing.
        public let counted: (@Sendable (inout UserErasure, Int) -> Void)?

        public init(
            counted: (@Sendable (inout UserErasure, Int) -> Void)? = nil, _ statement: @escaping @Sendable (_ userID: String) -> SharedStatement
        ) {
            (self.statement, self.counted) = (statement, counted)
        }
    }

    /// The deliveries one transaction stores for one notification: on its accept, a page of its
    /// fan-out, a scheduled send's due recipients, or a digest.
    public struct StoredDeliveries: Sendable {
        public let notification: ObjectID
        public let deliveries: [PlannedDelivery]
        /// When they were stored (a scheduled broadcast's: its instant).
        public let at: Date

        public init(notification: ObjectID, deliveries: [PlannedDelivery], at: Date) {
            (self.notification, self.deliveries, self.at) = (notification, deliveries, at)
        }
    }

    /// Names the module's migrations (`<name>/<migration>`); unique among a store's modules.
    public let name: String
    public let migrations: [Migration]
    public let erasure: [ErasureStep]
    /// Statements run in the transaction that stores the deliveries, after them: a failing one
    /// fails that transaction (its accept is answered with the error, nothing of it stored).
    public let whenDeliveriesStored: (@Sendable (StoredDeliveries) -> [SharedStatement])?

    public init(
        name: String, migrations: [Migration] = [], erasure: [ErasureStep] = [],
        whenDeliveriesStored: (@Sendable (StoredDeliveries) -> [SharedStatement])? = nil
    ) {
        self.name = name
        self.migrations = migrations
        self.erasure = erasure
        self.whenDeliveriesStored = whenDeliveriesStored
    }
}

/// The modules a store was opened with, as its transactions use them.
package struct StorageModules: Sendable {
    package let modules: [StorageModule]
    private let deliveryHooks: [@Sendable (StorageModule.StoredDeliveries) -> [SharedStatement]]

    /// Refuses two modules of one name, a name that cannot prefix a migration's, and a
    /// migration name that is empty or repeated within its module.
    package init(_ modules: [StorageModule]) throws {
        var names = Set<String>()
        for module in modules {
            guard !module.name.isEmpty, !module.name.contains("/") else {
                throw HeraldError(.unprocessable, code: "invalid_module", "a storage module's name must be non-empty and without '/' (got '\(module.name)')")
            }
            guard names.insert(module.name).inserted else {
                throw HeraldError(.unprocessable, code: "invalid_module", "two storage modules are named '\(module.name)'")
            }
            var migrations = Set<String>()
            for migration in module.migrations where migration.name.isEmpty || !migrations.insert(migration.name).inserted {
                throw HeraldError(
                    .unprocessable, code: "invalid_module", "storage module '\(module.name)' has an empty or repeated migration name '\(migration.name)'")
            }
        }
        self.init(checked: modules)
    }

    private init(checked modules: [StorageModule]) {
        self.modules = modules
        deliveryHooks = modules.compactMap(\.whenDeliveriesStored)
    }

    /// Each module's migrations under the name recorded for it, in the modules' order.
    package var migrations: [(name: String, migration: StorageModule.Migration)] {
        modules.flatMap { module in module.migrations.map { ("\(module.name)/\($0.name)", $0) } }
    }

    /// Whether a recorded migration name is a module's (kept apart from the store's own when
    /// telling whether a newer Herald migrated the database).
    package static func isModuleMigration(_ name: String) -> Bool { name.contains("/") }

    /// Whether a module of this name is among them.
    package func contains(named name: String) -> Bool { modules.contains { $0.name == name } }

    /// Whether any module runs statements beside stored deliveries.
    package var watchDeliveries: Bool { !deliveryHooks.isEmpty }

    /// The statements to run after storing `deliveries`; none when no module asks.
    package func afterStoring(_ deliveries: [PlannedDelivery], of notification: ObjectID, at micros: Int64) -> [SharedStatement] {
        guard !deliveryHooks.isEmpty, !deliveries.isEmpty else { return [] }
        let stored = StorageModule.StoredDeliveries(notification: notification, deliveries: deliveries, at: Timestamp.date(microseconds: micros))
        return deliveryHooks.flatMap { $0(stored) }
    }

    /// The erasure's module statements for `userID`, each with where its rows are counted.
    package func erasure(of userID: String) -> [(statement: SharedStatement, counted: (@Sendable (inout UserErasure, Int) -> Void)?)] {
        modules.flatMap { module in module.erasure.map { ($0.statement(userID), $0.counted) } }
    }

    package static let none = StorageModules(checked: [])
}
