import Foundation
import HeraldCore
import HeraldTestSupport
import PostgresNIO
import Testing

@testable import HeraldStore

/// The statements run per group commit and per delivery batch are prepared once per pooled
/// connection (``PreparedQuery``).
@Suite(.cleansUp) struct PostgresPreparedStatementTests {
    let ids = ObjectIDGenerator()
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    /// A prepared statement is kept by name: a text that changed with its input would run the
    /// first text with another input's binds.
    @Test func eachPreparedStatementHasOneTextWhateverItsInput() throws {
        let n = HeraldNotification(
            id: ids.next(at: t0), type: "comment", title: "T", body: "B", url: "https://x.example/p", data: ["k": "v"], timestamp: t0,
            priority: 3, expiresAt: t0.addingTimeInterval(60), collapseKey: "c", idempotencyKey: "key", target: .users(["a", "b"]))
        var writes = PostgresStore.StoredWrites(notifications: [(n, 2)], history: [(n.id.hex, "a", 1)], wakeWorkers: true)
        writes.deliveries = [
            .init(notification: n.id, at: 1, delivery: PlannedDelivery(sink: "fcm", userID: "a", deviceID: ids.next(at: t0), distribution: .alert))
        ]
        let texts: [(name: String, prepared: String, built: String)] = [
            (PostgresStore.WriteStatement.name, PostgresStore.WriteStatement.sql, try PostgresStore.WriteStatement(writes).query.sql),
            (
                PostgresStore.ClaimStatement.name, PostgresStore.ClaimStatement.sql,
                PostgresStore.ClaimStatement(now: 5, leaseUntil: 9, limit: 64, sinks: .excluding(["fcm", "apns"])).query.sql
            ),
            (
                PostgresStore.RecordStatement.name, PostgresStore.RecordStatement.sql,
                PostgresStore.RecordStatement([DeliveryUpdate(id: 1, state: .pending, attempts: 1, lastError: "x", nextAttemptAt: t0)], at: 3).query
                    .sql
            ),
            (PostgresStore.RecipientsStatement.name, PostgresStore.RecipientsStatement.sql, PostgresStore.RecipientsStatement(userIDs: ["a"]).query.sql),
            (PostgresStore.HistoryLockStatement.name, PostgresStore.HistoryLockStatement.sql, PostgresStore.HistoryLockStatement(users: ["a"]).query.sql),
            (
                PostgresStore.HistoryPageStatement.name, PostgresStore.HistoryPageStatement.sql,
                PostgresStore.HistoryPageStatement(userID: "a", before: 42, limit: 51).query.sql
            ),
        ]
        for (name, prepared, built) in texts {
            #expect(!prepared.isEmpty && built == prepared, "\(name)")
            // PostgreSQL keeps a statement's name to 63 bytes; longer ones could collide.
            #expect(name.utf8.count < 64, "\(name)")
        }
        #expect(Set(texts.map(\.name)).count == texts.count, "one name per statement")
    }

    /// A column that a later migration (another Herald process, upgraded first) adds to a table
    /// the statements read changes none of their results: PostgreSQL would refuse every later
    /// execution of a prepared statement on that connection otherwise ("cached plan must not
    /// change result type").
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func preparedStatementsOutliveAColumnAddedByAMigration() async throws {
        let store = try PostgresStore.patient(url: try await PostgresTestDatabase.create())
        TestResources.register { await store.close() }
        try await store.migrate()
        let device = try await store.registerDevice(
            userID: "a", registration: DeviceRegistration(address: DeviceAddress(provider: "fcm", token: "tok-a")), newID: ids.next(at: t0), at: t0)
        let n = HeraldNotification(
            id: ids.next(at: t0), type: "comment", title: "T", body: "B", url: nil, data: [:], timestamp: t0, priority: 3, expiresAt: nil,
            collapseKey: nil, idempotencyKey: nil, target: .users(["a"]))
        _ = try await store.accept(
            n, recipients: 1, deliveries: [PlannedDelivery(sink: "fcm", userID: "a", deviceID: device.id, distribution: .alert)], idempotencySince: t0)
        let prepared = try await store.withConnection { session in
            let before = try await session.rows(PostgresStore.RecipientsStatement(userIDs: ["a"]))
            let claimedBefore = try await session.rows(PostgresStore.ClaimStatement(now: 0, leaseUntil: 0, limit: 10, sinks: .all))
            let names = try await session.rows("SELECT name FROM pg_prepared_statements").map { try $0.text("name") }
            for table in ["devices", "notifications", "deliveries", "users"] {
                try await session.execute(PostgresQuery(unsafeSQL: "ALTER TABLE \(table) ADD COLUMN added_later TEXT"))
            }
            let after = try await session.rows(PostgresStore.RecipientsStatement(userIDs: ["a"]))
            let claimed = try await session.rows(
                PostgresStore.ClaimStatement(now: PostgresStore.micros(t0), leaseUntil: PostgresStore.micros(t0) + 1, limit: 10, sinks: .all))
            #expect(before.count == 1 && claimedBefore.isEmpty)
            #expect(try after.map { try StoredRecords.device($0) } == [device])
            #expect(try StoredRecords.claimedDeliveries(claimed).map(\.recipient.device) == [device])
            return names
        }
        #expect(Set(prepared).isSuperset(of: [PostgresStore.RecipientsStatement.name, PostgresStore.ClaimStatement.name]))
        #expect(store.preparation.isEnabled)
    }

    /// A prepared statement that fails for another reason than a lost connection turns
    /// preparing off, so the same statement runs again on the same connection: PostgreSQL
    /// answers a prepared statement whose result columns changed type with an error for as long
    /// as the connection lives (as postgres-nio does a name whose preparation failed).
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aFailedPreparedStatementRunsUnpreparedAfterwards() async throws {
        let store = try PostgresStore.patient(url: try await PostgresTestDatabase.create())
        TestResources.register { await store.close() }
        try await store.migrate()
        let n = HeraldNotification(
            id: ids.next(at: t0), type: "comment", title: "T", body: "B", url: nil, data: [:], timestamp: t0, priority: 3, expiresAt: nil,
            collapseKey: nil, idempotencyKey: nil, target: .users(["a"]))
        _ = try await store.accept(n, recipients: 1, deliveries: [PlannedDelivery(sink: "hook", userID: "a", distribution: .alert)], idempotencySince: t0)
        let due = PostgresStore.ClaimStatement(now: PostgresStore.micros(t0), leaseUntil: PostgresStore.micros(t0) + 1, limit: 10, sinks: .all)
        try await store.withConnection { session in
            #expect(try await session.rows(PostgresStore.ClaimStatement(now: 0, leaseUntil: 0, limit: 10, sinks: .all)).isEmpty)
            try await session.execute("ALTER TABLE notifications ALTER COLUMN title TYPE varchar(200)")
            await #expect(throws: PSQLError.self, "the statement prepared before the change fails") { try await session.rows(due) }
            #expect(!store.preparation.isEnabled)
            let claimed = try StoredRecords.claimedDeliveries(try await session.rows(due))
            #expect(claimed.map(\.notification.id) == [n.id], "the same statement, unprepared, on the same connection")
        }
        #expect(try await store.claimDue(now: t0.addingTimeInterval(2), limit: 10, lease: .seconds(1)).map(\.notification.id) == [n.id])
    }

    /// A prepared statement refused for its values (here a duplicate key, as a deadlock or a
    /// serialization failure would be refused for its rows) keeps preparing on: the statement
    /// was prepared, and runs prepared again on the same connection.
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aStatementRefusedForItsValuesKeepsPreparing() async throws {
        let store = try PostgresStore.patient(url: try await PostgresTestDatabase.create())
        TestResources.register { await store.close() }
        try await store.migrate()
        let ids = self.ids
        let t0 = self.t0
        func notification() -> HeraldNotification {
            HeraldNotification(
                id: ids.next(at: t0), type: "comment", title: "T", body: "B", url: nil, data: [:], timestamp: t0, priority: 3, expiresAt: nil,
                collapseKey: nil, idempotencyKey: nil, target: .users(["a"]))
        }
        let first = notification()
        let second = notification()
        try await store.withConnection { session in
            _ = try await session.rows(try PostgresStore.WriteStatement(.init(notifications: [(first, 1)])))
            await #expect(throws: PSQLError.self, "the same id twice") {
                try await session.rows(try PostgresStore.WriteStatement(.init(notifications: [(first, 1)])))
            }
            #expect(store.preparation.isEnabled)
            _ = try await session.rows(try PostgresStore.WriteStatement(.init(notifications: [(second, 1)])))
        }
        #expect(try await store.status(of: second.id) != nil)
        #expect(store.preparation.isEnabled)
    }
}
