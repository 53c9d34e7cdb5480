import Foundation
import GRDB
import HeraldCore
import HeraldTestSupport
import PostgresNIO
import Testing

@testable import HeraldStore

/// A database a newer Herald migrated (a rolling update in progress, or a rollback): this build
/// migrates what it knows, names what it does not, and runs on it.
@Suite(.cleansUp) struct NewerSchemaTests {
    static let future = "v99-from-a-newer-herald"

    func stillServes(_ store: some HeraldStorage) async throws {
        let ids = ObjectIDGenerator()
        let n = HeraldNotification(id: ids.next(), type: "comment", title: "T", body: "B", url: nil, timestamp: Date(), target: .users(["a"]))
        _ = try await store.accept(n, recipients: 1, deliveries: [PlannedDelivery(sink: "hook", userID: "a", distribution: .alert)], idempotencySince: Date())
        #expect(try await store.status(of: n.id)?.recipients == 1)
    }

    @Test func sqliteNamesMigrationsItDoesNotKnow() async throws {
        let path = try TestResources.temporaryDirectory("herald-newer").appendingPathComponent("test.sqlite").path
        let store = try SQLiteStore(path: path)
        TestResources.register { await store.close() }
        #expect(try await store.migrate().isEmpty, "a database this build migrated")
        try await store.writer.write { db in try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES (?)", arguments: [Self.future]) }
        #expect(try await store.migrate() == [Self.future])
        try await stillServes(store)
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func postgresNamesMigrationsItDoesNotKnow() async throws {
        let store = try PostgresStore.patient(url: try await PostgresTestDatabase.create())
        TestResources.register { await store.close() }
        #expect(try await store.migrate().isEmpty, "a database this build migrated")
        try await store.withConnection { session in try await session.execute("INSERT INTO herald_migrations (name) VALUES (\(Self.future))") }
        #expect(try await store.migrate() == [Self.future])
        try await stillServes(store)
    }

    @Test func theWarningNamesThem() throws {
        #expect(NewerSchema.warning([]) == nil)
        let warning = try #require(NewerSchema.warning([Self.future]))
        #expect(warning.contains("1 migration(s) this Herald does not know (\(Self.future))"))
        let many = (1...7).map { "v9\($0)-x" }
        #expect(NewerSchema.warning(many)?.contains("(v91-x, v92-x, v93-x, v94-x, v95-x, …)") == true)
    }
}
