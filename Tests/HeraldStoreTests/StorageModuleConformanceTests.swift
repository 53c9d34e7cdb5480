import Foundation
import HeraldCards
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

/// What a feature module keeps in the store (``StorageModule``, docs/architecture.md, "Storage
/// modules"), on every engine: its migrations run once after the store's own, its statements run
/// in the transaction that stores deliveries (all or nothing with it), and a user's erasure
/// removes its rows.
@Suite(.cleansUp) struct StorageModuleConformanceTests {
    let ids = ObjectIDGenerator()
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    func notification(_ users: [String]) -> HeraldNotification {
        HeraldNotification(id: ids.next(at: t0), type: "comment", title: "T", body: "B", url: nil, timestamp: t0, target: .users(users))
    }

    let route: @Sendable (RecipientContext) -> [PlannedDelivery] = { recipient in
        [PlannedDelivery(sink: "history", userID: recipient.userID, distribution: .alert)]
            + recipient.devices.map { PlannedDelivery(sink: "fcm", userID: recipient.userID, deviceID: $0.id, distribution: .alert) }
    }

    @Test(arguments: StoreKind.allCases)
    func deliveriesStoredAnyWayAreTalliedInTheirTransaction(_ kind: StoreKind) async throws {
        let store = try await kind.make(modules: [.cards, TallyModule.module])
        for user in ["ann", "bo"] {
            _ = try await store.registerDevice(userID: user, registration: .token("tok-\(user)", provider: "fcm"), newID: ids.next(), at: t0)
        }
        // Planned by the caller (a topic send's extra rows have no user and are not counted).
        let planned = notification(["ann"])
        _ = try await store.accept(
            planned, recipients: 1,
            deliveries: [
                PlannedDelivery(sink: "history", userID: "ann", distribution: .alert),
                PlannedDelivery(sink: "fcm", userID: "", topic: "news", distribution: .alert),
            ], idempotencySince: t0)
        // Read and routed in the accepting transaction.
        _ = try await store.acceptUsers(notification(["ann", "bo"]), userIDs: ["ann", "bo"], route: route, idempotency: nil, idempotencySince: t0)
        #expect(try await TallyModule.sends(store, sink: "history") == ["ann": 2, "bo": 1])
        #expect(try await TallyModule.sends(store, sink: "fcm") == ["ann": 1, "bo": 1])

        // A fan-out's pages, written after the accept.
        let audience = notification([])
        _ = try await store.acceptAudience(
            audience, audience: Audience(userIDs: ["ann", "bo"]), route: route, pageSize: 1, inlineLimit: 1, idempotency: nil, idempotencySince: t0)
        #expect(try await TallyModule.sends(store, sink: "fcm") == ["ann": 1, "bo": 1], "nothing is counted before the pages are written")
        while let progress = try await store.writeFanOutPage(of: audience.id, pageSize: 1, route: route), !progress.done {}
        #expect(try await TallyModule.sends(store, sink: "fcm") == ["ann": 2, "bo": 2])
        let last = try await store.rows(SharedStatement("SELECT last_notification FROM tally_sends WHERE user_id = 'bo' AND sink = 'fcm'"))
        #expect(try last.map { try $0.text("last_notification") } == [audience.id.hex], "the hook is told which notification it stores")
    }

    @Test(arguments: StoreKind.allCases)
    func aFailingModuleStatementStoresNothingOfItsAccept(_ kind: StoreKind) async throws {
        let store = try await kind.make(modules: [.cards, TallyModule.module])
        let refused = notification(["refused"])
        await #expect(throws: (any Error).self) {
            _ = try await store.acceptUsers(refused, userIDs: ["refused"], route: route, idempotency: nil, idempotencySince: t0)
        }
        #expect(try await store.status(of: refused.id) == nil, "the notification is not stored without its module's rows")
        #expect(try await store.history(userID: "refused", limit: 10, before: nil).items.isEmpty)

        // Accepts committed with it in one group commit are not failed by it.
        let others = (0..<8).map { _ in notification(["ann"]) }
        let results = try await withThrowingTaskGroup(of: Bool.self) { group in
            for n in others {
                group.addTask { (try? await store.acceptUsers(n, userIDs: ["ann"], route: route, idempotency: nil, idempotencySince: t0)) != nil }
            }
            group.addTask {
                (try? await store.acceptUsers(notification(["refused"]), userIDs: ["refused"], route: route, idempotency: nil, idempotencySince: t0)) != nil
            }
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.filter { $0 }.count == others.count)
        #expect(try await TallyModule.sends(store, sink: "history") == ["ann": Int64(others.count)])
    }

    @Test(arguments: StoreKind.allCases)
    func erasingAUserRemovesTheModulesRows(_ kind: StoreKind) async throws {
        let store = try await kind.make(modules: [.cards, TallyModule.module])
        _ = try await store.acceptUsers(notification(["ann", "bo"]), userIDs: ["ann", "bo"], route: route, idempotency: nil, idempotencySince: t0)
        _ = try await store.eraseUser(userID: "ann", at: t0)
        #expect(try await TallyModule.sends(store, sink: "history") == ["bo": 1])
    }

    /// A store opened on `location` (a SQLite file or a PostgreSQL database) with `modules`.
    func open(_ kind: StoreKind, _ location: String, modules: [StorageModule]) async throws -> any ServerStorage {
        let store: any ServerStorage =
            kind == .postgres ? try PostgresStore.patient(url: location, modules: modules) : try SQLiteStore(path: location, modules: modules)
        TestResources.register { await store.close() }
        return store
    }

    @Test(arguments: StoreKind.allCases.filter { $0 != .sqliteMemory })
    func aModulesMigrationsRunOnceAfterTheStoresOwn(_ kind: StoreKind) async throws {
        let location =
            kind == .postgres
            ? try await PostgresTestDatabase.create() : try TestResources.temporaryDirectory("herald-modules").appendingPathComponent("m.sqlite").path
        let first = try await open(kind, location, modules: [TallyModule.module])
        #expect(try await first.migrate() == [])
        #expect(try await first.migrate() == [], "a second run applies nothing and finds nothing unknown")
        // Its table is there.
        _ = try await first.transaction([SharedStatement("INSERT INTO tally_sends (user_id, sink, sends, last_notification) VALUES ('x', 'fcm', 1, 'n')")])
        await first.close()

        // Opened without the module (an embedder who dropped it), the database is not taken for a newer Herald's.
        let without = try await open(kind, location, modules: [])
        #expect(try await without.migrate() == [])
        #expect(try await without.rows(SharedStatement("SELECT sends FROM tally_sends")).count == 1, "its table is left as it was")
        await without.close()

        // A module added to a database migrated before it gets its tables on the next start.
        let again = try await open(
            kind, location,
            modules: [TallyModule.module, StorageModule(name: "later", migrations: [.init("v1", ["CREATE TABLE later_rows (id TEXT PRIMARY KEY)"])])])
        #expect(try await again.migrate() == [])
        #expect(try await again.rows(SharedStatement("SELECT id FROM later_rows")).isEmpty)
    }

    @Test func modulesThatCannotBeToldApartAreRefused() throws {
        let tally = TallyModule.module
        #expect(throws: HeraldError.self) { try SQLiteStore(path: ":memory:", modules: [tally, tally]) }
        #expect(throws: HeraldError.self) { try SQLiteStore(path: ":memory:", modules: [StorageModule(name: "a/b")]) }
        #expect(throws: HeraldError.self) {
            try SQLiteStore(path: ":memory:", modules: [StorageModule(name: "twice", migrations: [.init("v1", []), .init("v1", [])])])
        }
        #expect(throws: HeraldError.self) { try PostgresStore(url: "postgres://h@127.0.0.1:1/db", modules: [tally, tally]) }
    }
}

/// The cards module's store needs the cards module's erasure: on a store opened without it,
/// erasing a user would keep their cards, so no card store is made on one.
@Suite struct CardStorageModuleTests {
    @Test func aCardStoreIsRefusedOnAStoreThatWouldNotEraseCards() throws {
        #expect(throws: HeraldError.self) { try CardStores.on(try SQLiteStore(path: ":memory:")) }
        _ = try CardStores.on(try SQLiteStore(path: ":memory:", modules: [.cards]))
    }
}
