import Foundation
import GRDB
import HeraldCore
import HeraldStore
import HeraldTestSupport
import PostgresNIO
import Testing

/// A retry storm cannot starve first attempts: while new deliveries wait, retries take at most
/// half a claim, on every engine (docs/durability.md, "A provider that fails part of the time").
@Suite(.cleansUp) struct ClaimFairnessConformanceTests {
    let ids = ObjectIDGenerator()
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    func accept(_ user: String, at date: Date, into store: some HeraldStorage) async throws {
        let n = HeraldNotification(id: ids.next(at: date), type: "comment", title: "T", body: "B", url: nil, timestamp: date, target: .users([user]))
        _ = try await store.accept(n, recipients: 1, deliveries: [PlannedDelivery(sink: "hook", userID: user, distribution: .alert)], idempotencySince: date)
    }

    @Test(arguments: StoreKind.allCases)
    func retriesTakeABoundedShareOfAClaim(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        // Ten deliveries fail once and are due again at t0 + 5 s: older than anything new.
        for n in 0..<10 { try await accept("r\(n)", at: t0, into: store) }
        let first = try await store.claimDue(now: t0, limit: 10, lease: .seconds(30))
        #expect(first.count == 10)
        try await store.record(
            first.map { DeliveryUpdate(id: $0.id, state: .pending, attempts: $0.attempt, lastError: "503", nextAttemptAt: t0.addingTimeInterval(5)) },
            at: t0)
        // Ten new notifications arrive at t0 + 10 s.
        for n in 0..<10 { try await accept("f\(n)", at: t0.addingTimeInterval(10), into: store) }
        let mixed = try await store.claimDue(now: t0.addingTimeInterval(20), limit: 10, lease: .seconds(30))
        let retries = mixed.filter { $0.attempt > 1 }.count
        #expect(mixed.count == 10)
        #expect(retries == 5 && mixed.count - retries == 5, "older retries took \(retries) of 10 while first attempts waited")
        // With no first attempts waiting, retries take the whole claim.
        let rest = try await store.claimDue(now: t0.addingTimeInterval(20), limit: 10, lease: .seconds(30))
        #expect(rest.count == 10 && rest.filter { $0.attempt > 1 }.count == 5, "the other five retries and the other five new ones")
        for n in 0..<6 { try await accept("g\(n)", at: t0.addingTimeInterval(30), into: store) }
        #expect(try await store.claimDue(now: t0.addingTimeInterval(31), limit: 4, lease: .seconds(30)).count == 4)
    }

    /// A database from before the due deliveries' two indexes (one index of every pending
    /// delivery, `deliveries_due`) is given them by the migrations, by sink, and the old one is
    /// dropped; what was waiting in it is claimed afterwards: a retry and a first attempt.
    @Test(arguments: StoreKind.allCases)
    func anUpgradedDatabaseClaimsBothKindsThroughTheirIndexes(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        try await accept("retried", at: t0, into: store)
        let first = try await store.claimDue(now: t0, limit: 1, lease: .seconds(30))
        try await store.record(
            first.map { DeliveryUpdate(id: $0.id, state: .pending, attempts: $0.attempt, lastError: "503", nextAttemptAt: t0.addingTimeInterval(5)) }, at: t0)
        try await accept("new", at: t0.addingTimeInterval(1), into: store)
        // Back to the schema before the migration, rows and all.
        let columns = kind == .postgres ? "(next_attempt_at, id)" : "(next_attempt_at)"
        try await Self.run(
            [
                "DROP INDEX deliveries_first_due", "DROP INDEX deliveries_retry_due",
                "CREATE INDEX deliveries_due ON deliveries \(columns) WHERE state = 'pending'",
                kind == .postgres
                    ? "DELETE FROM herald_migrations WHERE name IN ('v25-due-kinds', 'v27-due-by-sink')"
                    : "DELETE FROM grdb_migrations WHERE identifier IN ('v25-due-kinds', 'v27-due-by-sink')",
            ], on: store)
        #expect(try await Self.indexes(of: store) == ["deliveries_due"])
        try await store.migrate()
        #expect(try await Self.indexes(of: store) == ["deliveries_first_due", "deliveries_retry_due"])
        for definition in try await Self.definitions(of: store) {
            #expect(definition.contains("(sink, next_attempt_at"), "by sink, then due: \(definition)")
        }
        #expect(try await store.nextDueDate(sinks: .all) == t0.addingTimeInterval(1))
        let claimed = try await store.claimDue(now: t0.addingTimeInterval(10), limit: 10, lease: .seconds(30))
        #expect(claimed.map(\.recipient.userID).sorted() == ["new", "retried"])
        #expect(claimed.map(\.attempt).sorted() == [1, 2])
    }

    /// Runs `statements` on the store's database, outside the store's API.
    static func run(_ statements: [String], on store: any ServerStorage) async throws {
        if let store = store as? PostgresStore {
            try await store.withConnection { session in
                for statement in statements { try await session.execute(PostgresQuery(unsafeSQL: statement)) }
            }
        } else if let store = store as? SQLiteStore {
            try await store.writer.write { db in for statement in statements { try db.execute(sql: statement) } }
        }
    }

    /// The names of the deliveries table's indexes of due rows (on PostgreSQL, the parent's).
    static func indexes(of store: any ServerStorage) async throws -> [String] {
        try await dueIndexes(of: store).map(\.name)
    }

    /// Their definitions, in the same order.
    static func definitions(of store: any ServerStorage) async throws -> [String] {
        try await dueIndexes(of: store).map(\.definition)
    }

    static func dueIndexes(of store: any ServerStorage) async throws -> [(name: String, definition: String)] {
        if let store = store as? PostgresStore {
            return try await store.withConnection { session in
                try await session.rows(
                    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'deliveries' AND indexname LIKE '%\\_due' ORDER BY indexname"
                ).map { (try $0.text("indexname"), try $0.text("indexdef")) }
            }
        }
        let store = try #require(store as? SQLiteStore)
        return try await store.writer.read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'deliveries' AND name LIKE '%\\_due' ESCAPE '\\' ORDER BY name"
            ).map { row -> (name: String, definition: String) in (try row.decode(forColumn: "name"), try row.decode(forColumn: "sql")) }
        }
    }
}
