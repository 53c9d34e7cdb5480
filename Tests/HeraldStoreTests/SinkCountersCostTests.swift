import Foundation
import GRDB
import HeraldCore
import HeraldTestSupport
import PostgresNIO
import Testing

@testable import HeraldStore

/// `herald sinks` reads what waits and what finished in its window, not every delivery kept
/// (SinkCountersSQL): on a store whose deliveries mostly finished long before the window, it
/// reads the window's rows through an index on both engines.
@Suite(.cleansUp) struct SinkCountersCostTests {
    static let t0 = Date(timeIntervalSince1970: 1_700_000_000)
    /// A day after ``t0``: the window starts an hour before it.
    static let later = t0.addingTimeInterval(86_400)
    static let old = 2_000

    /// ``old`` deliveries of `hook` finished at ``t0``, with an error each; then, at ``later``,
    /// two finished (one dead) and one pending.
    static func store(_ kind: StoreKind) async throws -> any ServerStorage {
        let store = try await kind.make()
        let ids = ObjectIDGenerator()
        func accept(_ users: [String], at: Date) async throws {
            let n = HeraldNotification(id: ids.next(at: at), type: "comment", title: "T", body: "B", url: nil, timestamp: at, target: .users(users))
            _ = try await store.accept(
                n, recipients: users.count, deliveries: users.map { PlannedDelivery(sink: "hook", userID: $0, distribution: .alert) }, idempotencySince: at)
        }
        try await accept((0..<old).map { "old-\($0)" }, at: t0)
        for _ in 0..<(old / 500) {
            let long = try await store.claimDue(now: t0, limit: 500, lease: .seconds(30))
            try await store.record(long.map { DeliveryUpdate(id: $0.id, state: .dead, attempts: 1, lastError: "500 long ago") }, at: t0)
        }
        try await accept(["new-0", "new-1", "new-2"], at: later)
        let recent = try await store.claimDue(now: later, limit: 2, lease: .seconds(30))
        try await store.record(
            [
                DeliveryUpdate(id: recent[0].id, state: .delivered, attempts: 1),
                DeliveryUpdate(id: recent[1].id, state: .dead, attempts: 1, lastError: "410 Gone"),
            ],
            at: later)
        #expect(
            try await store.sinkCounters(finishedSince: later.addingTimeInterval(-3600)) == [
                SinkCounters(sink: "hook", counts: [.pending: 1, .delivered: 1, .dead: 1], lastError: "410 Gone")
            ])
        return store
    }

    /// SQLite: every read of `deliveries` searches an index or walks one (the waiting states'
    /// partial indexes); none scans the table.
    @Test(arguments: [StoreKind.sqlite, .sqliteMemory])
    func sqliteReadsThroughIndexes(_ kind: StoreKind) async throws {
        let store = try #require(try await Self.store(kind) as? SQLiteStore)
        let plans = try await store.writer.read { db in
            try [SinkCountersSQL.waiting, SinkCountersSQL.finishedSince, SinkCountersSQL.lastError].map { sql in
                let explain = try db.makeStatement(sql: "EXPLAIN QUERY PLAN " + sql)
                explain.setUncheckedArguments([])
                return try Row.fetchAll(explain).map { try $0.decode(forColumn: "detail") as String }
            }
        }
        for plan in plans {
            let reads = plan.filter { $0.contains(/^(?:SCAN|SEARCH) deliveries\b/) }
            #expect(!reads.isEmpty && reads.allSatisfy { $0.contains("INDEX") }, "\(plan.joined(separator: "\n"))")
        }
        #expect(plans[1].contains { $0.contains("USING INDEX deliveries_finished_by_age (updated_at>?)") }, "\(plans[1])")
    }

    /// PostgreSQL: the rows its scans of `deliveries` return, run for real (`EXPLAIN ANALYZE`),
    /// are the window's and the waiting ones, not the ``old`` ones.
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func postgresReadsTheWindowsRows() async throws {
        let store = try #require(try await Self.store(.postgres) as? PostgresStore)
        let since = PostgresStore.micros(Self.later.addingTimeInterval(-3600))
        let plans = try await store.withConnection { session in
            try await session.execute("ANALYZE deliveries")
            var finished = PostgresBindings()
            finished.append(since)
            var error = PostgresBindings()
            error.append("hook")
            error.append(since)
            var plans: [[String]] = []
            for query in [
                PostgresQuery(unsafeSQL: SinkCountersSQL.waiting), PostgresQuery(unsafeSQL: SinkCountersSQL.finishedSince, binds: finished),
                PostgresQuery(unsafeSQL: SinkCountersSQL.lastError, binds: error),
            ] {
                plans.append(
                    try await session.rows(PostgresQuery(unsafeSQL: "EXPLAIN ANALYZE " + query.sql, binds: query.binds)).map { try $0.text("QUERY PLAN") })
            }
            return plans
        }
        for plan in plans {
            // Rows a scan returned, and those it read and dropped (a filter's, a recheck's).
            let rows = plan.compactMap { line in
                line.firstMatch(of: /Scan.* on deliveries\w*.*actual time=[\d.]+\.\.[\d.]+ rows=(\d+) loops=(\d+)/).map { (Int($0.1) ?? 0) * (Int($0.2) ?? 0) }
                    ?? line.firstMatch(of: /Rows Removed by (?:Filter|Index Recheck): (\d+)/).map { Int($0.1) ?? 0 }
            }
            #expect(plan.contains { $0.contains(/Scan.* on deliveries/) }, "\(plan.joined(separator: "\n"))")
            #expect(rows.reduce(0, +) <= 10, "rows read: \(rows) of \(Self.old + 3)\n\(plan.joined(separator: "\n"))")
        }
    }
}
