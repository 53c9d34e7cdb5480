import Foundation
import GRDB
import HeraldCore
import HeraldTestSupport
import PostgresNIO
import Testing

@testable import HeraldStore

/// Devices of any provider, on every engine, and the migration that made existing devices FCM.
@Suite(.cleansUp) struct DeviceStoreConformanceTests {
    let ids = ObjectIDGenerator()
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    static let subscription: JSONValue = .object([
        "endpoint": .string("https://push.example/send/abc"), "keys": .object(["p256dh": .string("BPk"), "auth": .string("au")]),
    ])

    /// Registrations arriving together (SQLite commits them in one transaction) land as they
    /// would one by one: one device per address, the same device for every registration of it,
    /// owned by one of its registrants (two users register each address, so one takes it from
    /// the other, within one transaction or across two).
    @Test(arguments: StoreKind.allCases)
    func concurrentRegistrationsLandAsIfOneByOne(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let ids = self.ids
        let t0 = self.t0
        let devices = try await withThrowingTaskGroup(of: Device.self) { group in
            for index in 0..<64 {
                group.addTask {
                    try await store.registerDevice(
                        userID: "user-\(index % 7)", registration: .token("tok-\(index % 32)", provider: "fcm"), newID: ids.next(), at: t0)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(devices.count == 64)
        let deviceByToken = Dictionary(grouping: devices, by: { $0.token ?? "" }).mapValues { Set($0.map(\.id)) }
        #expect(deviceByToken.count == 32 && deviceByToken.values.allSatisfy { $0.count == 1 }, "one device per address")
        var held: [String] = []
        for user in 0..<7 { held += try await store.devices(userID: "user-\(user)").compactMap(\.token) }
        #expect(held.sorted() == (0..<32).map { "tok-\($0)" }.sorted(), "each address held once, by one of its registrants")
    }

    /// Registrations past the device limit arriving together (committed in one transaction on
    /// both engines, the limit checked after it on PostgreSQL) leave no user over the limit, and
    /// each removed device is answered as evicted exactly once.
    @Test(arguments: StoreKind.allCases)
    func concurrentRegistrationsPastTheLimitEvictEachDeviceOnce(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let ids = self.ids
        let t0 = self.t0
        let results = try await withThrowingTaskGroup(of: RegisteredDevice.self) { group in
            for index in 0..<60 {
                group.addTask {
                    try await store.registerDevice(
                        userID: "user-\(index % 6)", registration: .token("tok-\(index)", provider: "fcm"), newID: ids.next(),
                        at: t0.addingTimeInterval(Double(index)), keepingAtMost: 3)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let evicted = results.flatMap(\.evicted).compactMap(\.token)
        #expect(evicted.count == Set(evicted).count, "no device evicted twice")
        var held: [String] = []
        for user in 0..<6 {
            let tokens = try await store.devices(userID: "user-\(user)").compactMap(\.token)
            #expect(tokens.count == 3, "user-\(user) holds \(tokens)")
            held += tokens
        }
        #expect(Set(held).isDisjoint(with: evicted))
        #expect((held + evicted).sorted() == (0..<60).map { "tok-\($0)" }.sorted(), "every device either held or answered as evicted")
        await store.close()
    }

    @Test(arguments: StoreKind.allCases)
    func devicesOfEveryProviderRoundTrip(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        var webPush = DeviceRegistration(
            address: DeviceAddress(provider: "webpush", value: Self.subscription, key: ""), addressField: "web_push", app: "push-eu")
        try webPush.validateCommonFields()
        let apns = DeviceRegistration(address: DeviceAddress(provider: "apns", token: "same-token"), options: ["environment": "sandbox"], platform: "ios")
        let fcm = try await store.registerDevice(userID: "u", registration: .token("same-token", provider: "fcm"), newID: ids.next(), at: t0)
        let ios = try await store.registerDevice(userID: "u", registration: apns, newID: ids.next(), at: t0)
        let web = try await store.registerDevice(userID: "u", registration: webPush, newID: ids.next(), at: t0)
        #expect(fcm.id != ios.id, "one address under two providers is two devices")
        let devices = try await store.devices(userID: "u")
        #expect(devices.map(\.provider) == ["fcm", "apns", "webpush"])
        #expect(devices[1].options == ["environment": "sandbox"] && devices[1].token == "same-token" && devices[1].platform == "ios")
        #expect(devices[2].address.value == Self.subscription, "an object address comes back as it was sent")
        #expect(devices[2].address.key == Self.subscription.canonicalText && devices[2].app == "push-eu")
        #expect(devices[0].app == nil && devices[0].options.isEmpty)
        // Claims carry the device's whole address.
        let n = HeraldNotification(id: ids.next(at: t0), type: "comment", title: "T", body: "B", url: nil, timestamp: t0, target: .users(["u"]))
        _ = try await store.accept(
            n, recipients: 1, deliveries: [PlannedDelivery(sink: "webpush", userID: "u", deviceID: web.id, distribution: .alert)],
            idempotencySince: t0
        )
        let claimed = try await store.claimDue(now: t0.addingTimeInterval(1), limit: 10, lease: .seconds(30))
        #expect(claimed.first?.recipient.device == devices[2])
        // Unregistering names the provider: the FCM device with the same token stays.
        #expect(try await store.unregisterDevice(userID: "u", provider: "apns", addressKey: "same-token", at: t0))
        #expect(try await store.devices(userID: "u").map(\.provider) == ["fcm", "webpush"])
        // Registering again replaces app and options with what was sent.
        let moved = try await store.registerDevice(userID: "u", registration: .token("same-token", provider: "fcm"), newID: ids.next(), at: t0)
        #expect(moved.id == fcm.id)
        await store.close()
    }

    /// A database created before devices had providers keeps every device, as an FCM token.
    @Test func sqliteMigrationKeepsExistingDevicesAsFCM() async throws {
        let directory = try TestResources.temporaryDirectory("herald-migrate")
        let path = directory.appendingPathComponent("old.sqlite").path
        let id = ids.next(at: t0)
        do {
            let old = try DatabaseQueue(path: path)
            try SQLiteSchema.migrator.migrate(old, upTo: "v6-portal-sessions")
            try await old.write { db in
                try db.execute(
                    sql: "INSERT INTO devices (id, user_id, fcm_token, platform, created_at, updated_at) VALUES (?, 'u', 'old-token', 'android', 1, 1)",
                    arguments: [id.hex]
                )
            }
            try old.close()
        }
        let store = try SQLiteStore(path: path)
        TestResources.register { await store.close() }
        try await store.migrate()
        let devices = try await store.devices(userID: "u")
        #expect(devices.map(\.id) == [id] && devices.first?.provider == "fcm" && devices.first?.token == "old-token" && devices.first?.platform == "android")
        #expect(try await store.unregisterDevice(userID: "u", provider: "fcm", addressKey: "old-token", at: t0))
    }

    /// Leaves `store`'s database as a Herald from before the migration `name` did, then runs
    /// `rows` (what that Herald stored) in the same transaction.
    static func migratePostgres(
        _ store: PostgresStore, before name: String, then rows: @escaping @Sendable (PostgresSession) async throws -> Void
    ) async throws {
        try await store.transaction { session in
            try await session.execute("SELECT pg_advisory_xact_lock(7243150)")
            try await session.execute("CREATE TABLE herald_migrations (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
            for migration in PostgresSchema.migrations.prefix(while: { $0.name != name }) {
                for statement in migration.sql { try await session.execute(PostgresQuery(unsafeSQL: statement)) }
                try await session.execute("INSERT INTO herald_migrations (name) VALUES (\(migration.name))")
            }
            try await rows(session)
        }
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func postgresMigrationKeepsExistingDevicesAsFCM() async throws {
        let store = try PostgresStore.patient(url: try await PostgresTestDatabase.create())
        TestResources.register { await store.close() }
        let id = ids.next(at: t0)
        try await Self.migratePostgres(store, before: "v3-device-providers") { session in
            try await session.execute(
                "INSERT INTO devices (id, user_id, fcm_token, platform, created_at, updated_at) VALUES (\(id.hex), 'u', 'old-token', 'android', 1, 1)"
            )
        }
        try await store.migrate()
        let devices = try await store.devices(userID: "u")
        #expect(devices.map(\.id) == [id] && devices.first?.provider == "fcm" && devices.first?.token == "old-token" && devices.first?.platform == "android")
        // The new uniqueness is per provider.
        _ = try await store.registerDevice(userID: "u", registration: .token("old-token", provider: "apns"), newID: ids.next(), at: t0)
        #expect(try await store.devices(userID: "u").count == 2)
        await store.close()
    }

    /// Rows an older Herald kept for the APNs re-keying migration: one device registered in
    /// upper and in lower case (by two users, the lower-case one last), one upper-case token
    /// alone, a scripted emulator token, and an FCM token (FCM's are case-sensitive), plus a
    /// pending push for each of the duplicate pair.
    static let apnsRows: [(id: String, user: String, provider: String, key: String, updated: Int64)] = [
        ("000000000000000000000a01", "ann", "apns", "ABCDEF01", 1), ("000000000000000000000a02", "bob", "apns", "abcdef01", 2),
        ("000000000000000000000a03", "cat", "apns", "DEADBEEF", 1), ("000000000000000000000a04", "cat", "apns", "Scripted-TOKEN", 1),
        ("000000000000000000000a05", "dan", "fcm", "ABCDEF01", 1),
    ]

    /// What the migration must leave, read through the store.
    func expectAPNsKeysMerged(_ store: any ServerStorage) async throws {
        #expect(try await store.devices(userID: "ann").isEmpty, "the older of two rows for one device goes")
        let bob = try await store.devices(userID: "bob")
        #expect(bob.map(\.token) == ["abcdef01"])
        let cat = try await store.devices(userID: "cat").sorted { $0.id.hex < $1.id.hex }
        #expect(cat.map(\.token) == ["DEADBEEF", "Scripted-TOKEN"], "tokens stay as sent")
        #expect(try await store.devices(userID: "dan").map(\.token) == ["ABCDEF01"])
        #expect(try await store.unregisterDevice(userID: "cat", provider: "apns", addressKey: "deadbeef", at: t0), "keyed in lower case")
        #expect(try await store.unregisterDevice(userID: "cat", provider: "apns", addressKey: "Scripted-TOKEN", at: t0))
    }

    /// The two queued pushes after the migration: the merged row's failed, the device's own still pending.
    func expectMergedRowsPushFailed(_ rows: [(user: String, state: String, error: String?)]) {
        #expect(rows.map(\.user) == ["ann", "bob"] && rows.map(\.state) == ["failed", "pending"], "\(rows)")
        #expect(rows.first?.error == DeviceKeys.mergedReason)
    }

    @Test func sqliteMigrationKeysAPNsTokensInLowerCaseOneRowPerDevice() async throws {
        let directory = try TestResources.temporaryDirectory("herald-migrate")
        let path = directory.appendingPathComponent("old.sqlite").path
        do {
            let old = try DatabaseQueue(path: path)
            try SQLiteSchema.migrator.migrate(old, upTo: "v14-card-history-index")
            try await old.write { db in
                for row in Self.apnsRows {
                    try db.execute(
                        sql: "INSERT INTO devices (id, user_id, provider, address_key, created_at, updated_at) VALUES (?, ?, ?, ?, 1, ?)",
                        arguments: [row.id, row.user, row.provider, row.key, row.updated])
                }
                for row in Self.apnsRows.prefix(2) {
                    try db.execute(
                        sql:
                            "INSERT INTO deliveries (notification_id, sink, user_id, device_id, distribution, state, next_attempt_at, updated_at) VALUES ('n', 'apns', ?, ?, 'alert', 'pending', 1, 1)",
                        arguments: [row.user, row.id])
                }
            }
            try old.close()
        }
        let store = try SQLiteStore(path: path)
        TestResources.register { await store.close() }
        try await store.migrate()
        try await expectAPNsKeysMerged(store)
        await store.close()
        let rows = try await DatabaseQueue(path: path).read { db in
            try Row.fetchAll(db, sql: "SELECT user_id, state, last_error FROM deliveries ORDER BY id").map { row in
                (user: row["user_id"] as String, state: row["state"] as String, error: row["last_error"] as String?)
            }
        }
        expectMergedRowsPushFailed(rows)
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func postgresMigrationKeysAPNsTokensInLowerCaseOneRowPerDevice() async throws {
        let store = try PostgresStore.patient(url: try await PostgresTestDatabase.create())
        TestResources.register { await store.close() }
        try await Self.migratePostgres(store, before: "v11-apns-keys-in-lower-case") { session in
            for row in Self.apnsRows {
                try await session.execute(
                    "INSERT INTO devices (id, user_id, provider, address_key, created_at, updated_at) VALUES (\(row.id), \(row.user), \(row.provider), \(row.key), 1, \(row.updated))"
                )
            }
            for row in Self.apnsRows.prefix(2) {
                try await session.execute(
                    """
                    INSERT INTO deliveries (notification_id, sink, user_id, device_id, distribution, state, next_attempt_at, updated_at)
                    VALUES ('n', 'apns', \(row.user), \(row.id), 'alert', 'pending', 1, 1)
                    """
                )
            }
        }
        try await store.migrate()
        try await expectAPNsKeysMerged(store)
        let rows = try await store.transaction { session in
            try await session.rows("SELECT user_id, state, last_error FROM deliveries ORDER BY id").map { row in
                (user: try row.text("user_id"), state: try row.text("state"), error: try row.optionalText("last_error"))
            }
        }
        expectMergedRowsPushFailed(rows)
        await store.close()
    }
}
