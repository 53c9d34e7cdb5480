import Foundation
import GRDB
import HeraldCore
import HeraldTestSupport
import PostgresNIO
import Testing

@testable import HeraldStore

/// Reads of the queue cost a few index searches a sink, however long the queue, on both
/// engines: the gauges of `/metrics` and `/health/sinks` (QueueStatsSQL), which joined every
/// pending delivery to its notification before, and a claim that leaves out an open circuit's
/// sink (DueDeliveriesSQL), which walked that sink's whole backlog in due order before.
@Suite(.cleansUp) struct QueueReadCostTests {
    static let t0 = Date(timeIntervalSince1970: 1_700_000_000)
    /// The outage's sink, with ``backlog`` deliveries waiting, older than every other's.
    static let down = "fcm"
    static let backlog = 2_000
    /// The other sinks, with ``others`` deliveries each, accepted after the backlog.
    static let up = ["apns", "history", "hook"]
    static let others = 5

    /// A store in the middle of an outage: ``down``'s backlog first, a notification each 100
    /// deliveries, then a few deliveries of each sink in ``up``.
    static func outage(_ kind: StoreKind) async throws -> any ServerStorage {
        let store = try await kind.make()
        let ids = ObjectIDGenerator()
        func accept(_ users: [String], to sink: String, at offset: Double) async throws {
            let at = t0.addingTimeInterval(offset)
            let n = HeraldNotification(id: ids.next(at: at), type: "comment", title: "T", body: "B", url: nil, timestamp: at, target: .users(users))
            _ = try await store.accept(
                n, recipients: users.count, deliveries: users.map { PlannedDelivery(sink: sink, userID: $0, distribution: .alert) }, idempotencySince: t0)
        }
        for batch in 0..<(backlog / 100) { try await accept((0..<100).map { "down-\(batch)-\($0)" }, to: down, at: Double(batch)) }
        for (index, sink) in up.enumerated() {
            for n in 0..<others { try await accept(["\(sink)-\(n)"], to: sink, at: Double(100 + index * others + n)) }
        }
        #expect(try await store.queueStats().pending == backlog + up.count * others)
        #expect(
            try await store.oldestPendingBySink() == [
                "apns": t0.addingTimeInterval(100), "fcm": t0, "history": t0.addingTimeInterval(105), "hook": t0.addingTimeInterval(110),
            ])
        return store
    }

    /// The claim's answer whatever the engine: the earliest of the sinks taken, none of the
    /// sink left out, and the next due time of the sinks taken.
    static func expectClaimsLeaveTheBacklogOut(_ store: any ServerStorage) async throws {
        #expect(try await store.nextDueDate(sinks: .excluding([down])) == t0.addingTimeInterval(100))
        #expect(try await store.nextDueDate(sinks: .all) == t0)
        let claimed = try await store.claimDue(now: t0.addingTimeInterval(1000), limit: 8, lease: .seconds(30), sinks: .excluding([down]))
        #expect(claimed.map(\.recipient.userID).sorted() == (0..<5).map { "apns-\($0)" } + (0..<3).map { "history-\($0)" })
        let probe = try await store.claimDue(now: t0.addingTimeInterval(1000), limit: 2, lease: .seconds(30), sinks: .only(down))
        #expect(probe.map(\.recipient.userID) == ["down-0-0", "down-0-1"])
    }

    /// SQLite: every read of `deliveries` in the oldest-by-sink query is a search of an index
    /// (the next sink, a sink's first entry), none a walk (`SCAN`); the count's walk of a pending
    /// index is the only one in the stats. A claim's read of a sink's due deliveries searches
    /// its kind's index by sink and time.
    @Test(arguments: [StoreKind.sqlite, .sqliteMemory])
    func sqliteSearchesEachSink(_ kind: StoreKind) async throws {
        let store = try #require(try await Self.outage(kind) as? SQLiteStore)
        let (bySink, stats, due) = try await store.writer.read { db in
            (
                try Self.plan(QueueStatsSQL.oldestBySink, db), try Self.plan(QueueStatsSQL.queueStats, db),
                try DueDeliveriesSQL.kinds.map { try Self.plan(DueDeliveriesSQL.dueOfSink($0.condition), db) }
            )
        }
        let tables = /^(?:SCAN|SEARCH) (deliveries|notifications|d|n)\b/
        #expect(bySink.filter { $0.contains(tables) }.allSatisfy { $0.hasPrefix("SEARCH") }, "\(bySink.joined(separator: "\n"))")
        #expect(bySink.filter { $0.contains("USING INDEX deliveries_pending_by_sink (sink") }.count == 2, "\(bySink.joined(separator: "\n"))")
        let walks = stats.filter { $0.hasPrefix("SCAN") && $0.contains(tables) }
        #expect(walks.count == 1, "only the count walks: \(stats.joined(separator: "\n"))")
        for (plan, kind) in zip(due, DueDeliveriesSQL.kinds) {
            #expect(plan == ["SEARCH deliveries USING INDEX \(kind.index) (sink=? AND next_attempt_at<?)"], "\(plan)")
        }
    }

    /// PostgreSQL: the rows its scans of `deliveries` return, run for real (`EXPLAIN ANALYZE`)
    /// in the outage, are a handful per sink: for the gauges, and for a claim that leaves the
    /// backlog out (which then claims for real).
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func postgresReadsAHandfulOfRowsPerSink() async throws {
        let store = try #require(try await Self.outage(.postgres) as? PostgresStore)
        let claim = PostgresStore.ClaimStatement(
            now: PostgresStore.micros(Self.t0.addingTimeInterval(1000)), leaseUntil: PostgresStore.micros(Self.t0.addingTimeInterval(1030)), limit: 8,
            sinks: .excluding([Self.down])
        ).query
        let (gauges, claiming) = try await store.withConnection { session in
            try await session.execute("ANALYZE deliveries")
            func explain(_ query: PostgresQuery) async throws -> [String] {
                try await session.rows(PostgresQuery(unsafeSQL: "EXPLAIN ANALYZE " + query.sql, binds: query.binds)).map { try $0.text("QUERY PLAN") }
            }
            return (try await explain(PostgresQuery(unsafeSQL: QueueStatsSQL.oldestBySink)), try await explain(claim))
        }
        for (plan, most) in [(gauges, 4 * (Self.up.count + 1)), (claiming, 60)] {
            let rows = plan.compactMap { line in
                line.firstMatch(of: /Scan.* on deliveries\w*.*actual time=[\d.]+\.\.[\d.]+ rows=(\d+) loops=(\d+)/).map { (Int($0.1) ?? 0) * (Int($0.2) ?? 0) }
            }
            #expect(!rows.isEmpty, "the plan reads deliveries: \(plan.joined(separator: "\n"))")
            #expect(rows.reduce(0, +) <= most, "rows read: \(rows), at most \(most) of \(Self.backlog)\n\(plan.joined(separator: "\n"))")
        }
        // EXPLAIN ANALYZE claimed those eight: the next claim gets the rest, in due order.
        #expect(try await store.claimDue(now: Self.t0.addingTimeInterval(1000), limit: 20, lease: .seconds(30), sinks: .excluding([Self.down])).count == 7)
    }

    /// Both engines give the same answers in an outage.
    @Test(arguments: StoreKind.allCases)
    func claimsInAnOutage(_ kind: StoreKind) async throws {
        try await Self.expectClaimsLeaveTheBacklogOut(try await Self.outage(kind))
    }

    static func plan(_ sql: String, _ db: Database) throws -> [String] {
        let explain = try db.makeStatement(sql: "EXPLAIN QUERY PLAN " + sql)
        explain.setUncheckedArguments([])
        return try Row.fetchAll(explain).map { try $0.decode(forColumn: "detail") }
    }
}
