import Foundation
import GRDB
import HeraldCore
import HeraldTestSupport
import PostgresNIO
import Testing

@testable import HeraldStore

/// `/metrics` and `/health/sinks` find each sink's oldest waiting delivery with a few index
/// searches, however long the queue (QueueStatsSQL). They joined every pending delivery to its
/// notification before: 0.80 s a scrape with a million waiting (docs/performance.md).
@Suite(.cleansUp) struct QueueGaugeReadTests {
    static let sinks = ["apns", "fcm", "history", "hook"]
    static let waiting = 2_000

    /// A store with ``waiting`` pending deliveries spread over ``sinks``, a notification each
    /// 100 of them.
    static func backlog(_ kind: StoreKind) async throws -> any ServerStorage {
        let store = try await kind.make()
        let ids = ObjectIDGenerator()
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        for batch in 0..<(waiting / 100) {
            let at = t0.addingTimeInterval(Double(batch))
            let users = (0..<100).map { "u\(batch)-\($0)" }
            let n = HeraldNotification(id: ids.next(at: at), type: "comment", title: "T", body: "B", url: nil, timestamp: at, target: .users(users))
            let deliveries = users.enumerated().map { PlannedDelivery(sink: sinks[$0.offset % sinks.count], userID: $0.element, distribution: .alert) }
            _ = try await store.accept(n, recipients: users.count, deliveries: deliveries, idempotencySince: t0)
        }
        #expect(try await store.queueStats().pending == waiting)
        #expect(try await store.oldestPendingBySink() == Dictionary(uniqueKeysWithValues: sinks.map { ($0, t0) }))
        return store
    }

    /// SQLite: every read of `deliveries` in the oldest-by-sink query is a search of an index
    /// (the next sink, a sink's first entry), none a walk (`SCAN`); the count's walk of a pending
    /// index is the only one in the stats.
    @Test(arguments: [StoreKind.sqlite, .sqliteMemory])
    func sqliteSearchesForEachSinksOldest(_ kind: StoreKind) async throws {
        let store = try #require(try await Self.backlog(kind) as? SQLiteStore)
        let (bySink, stats) = try await store.writer.read { db in
            (try Self.plan(QueueStatsSQL.oldestBySink, db), try Self.plan(QueueStatsSQL.queueStats, db))
        }
        let tables = /^(?:SCAN|SEARCH) (deliveries|notifications|d|n)\b/
        #expect(bySink.filter { $0.contains(tables) }.allSatisfy { $0.hasPrefix("SEARCH") }, "\(bySink.joined(separator: "\n"))")
        #expect(bySink.filter { $0.contains("USING INDEX deliveries_pending_by_sink (sink") }.count == 2, "\(bySink.joined(separator: "\n"))")
        let walks = stats.filter { $0.hasPrefix("SCAN") && $0.contains(tables) }
        #expect(walks.count == 1, "only the count walks: \(stats.joined(separator: "\n"))")
    }

    /// PostgreSQL: the rows its index scans of `deliveries` return, run for real on a queue of
    /// ``waiting``, are a handful per sink.
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func postgresReadsAHandfulOfRowsPerSink() async throws {
        let store = try #require(try await Self.backlog(.postgres) as? PostgresStore)
        let plan = try await store.withConnection { session in
            try await session.execute("ANALYZE deliveries")
            return try await session.rows(PostgresQuery(unsafeSQL: "EXPLAIN ANALYZE " + QueueStatsSQL.oldestBySink)).map { try $0.text("QUERY PLAN") }
        }
        let scans = plan.compactMap { line in
            line.firstMatch(of: /Scan.* on deliveries\w*.*actual time=[\d.]+\.\.[\d.]+ rows=(\d+) loops=(\d+)/).map { (Int($0.1) ?? 0) * (Int($0.2) ?? 0) }
        }
        #expect(!scans.isEmpty, "the plan reads deliveries: \(plan.joined(separator: "\n"))")
        #expect(scans.reduce(0, +) <= 4 * Self.sinks.count, "rows read: \(scans)\n\(plan.joined(separator: "\n"))")
    }

    static func plan(_ sql: String, _ db: Database) throws -> [String] {
        try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql).map { try $0.decode(forColumn: "detail") }
    }
}
