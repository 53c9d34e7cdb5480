import Foundation
import HeraldServer
import HeraldStore
import HeraldTestSupport
import PostgresNIO
import Testing

/// The PostgreSQL half of ``QueryPlanTests`` (issue 62): the same flows through the API on
/// PostgreSQL, every statement Herald sent recorded by the server itself (`log_statement = all`
/// for the test's database alone, read back from the log `scripts/test`'s server writes beside
/// its data folder), and the generic plan of each, with sequential scans disabled so that one
/// left in a plan means no index could serve it, may not scan a table that grows. Serialized:
/// the log holds every logged database's statements, and only one test's may be logged at a time.
@Suite(.cleansUp, .serialized) struct PostgresQueryPlanTests {
    /// Tables that stay small whatever the traffic: ``QueryPlanTests/small``, and the migrations'
    /// table under its PostgreSQL name.
    static let small = QueryPlanTests.small.union(["herald_migrations"])

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func noRequestPathScansAGrowingTable() async throws {
        let (statements, admin) = try await Self.recordedStatements { try await QueryPlanTests.exerciseRequestPaths($0) }
        let (scans, unplanned) = try await Self.fullScans(statements, admin)
        try await Self.expectDueReadsThroughTheirKindsIndexes(statements, admin)
        let (control, _) = try await Self.fullScans(["SELECT count(*) FROM history h WHERE h.type = $1"], admin)
        #expect(!control.isEmpty, "the check sees a scan (one per partition of history), aliased or not")
        #expect(statements.count > 30, "the workload ran: \(statements.count) statements")
        #expect(statements.count - unplanned.count > 30, "most are planned: \(unplanned.joined(separator: "\n"))")
        #expect(scans.isEmpty, "\(scans.joined(separator: "\n\n"))")
    }

    /// ``BackgroundWorkQueryPlanTests`` on PostgreSQL, where retention drops whole months
    /// first (a statement with no plan) and deletes what is left in batches.
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func noBackgroundWorkScansAGrowingTable() async throws {
        let (statements, admin) = try await Self.recordedStatements(configure: BackgroundWorkQueryPlanTests.configure) {
            try await BackgroundWorkQueryPlanTests.exercise($0)
        }
        let (scans, unplanned) = try await Self.fullScans(statements, admin)
        BackgroundWorkQueryPlanTests.expectEveryKindReached(statements)
        #expect(statements.contains { $0.hasPrefix("DROP TABLE history_") }, "history's months were dropped")
        #expect(statements.count - unplanned.count > 30, "most are planned: \(unplanned.joined(separator: "\n"))")
        #expect(scans.isEmpty, "\(scans.joined(separator: "\n\n"))")
    }

    /// Every statement a Herald on a fresh PostgreSQL database (configured by `configure`) sent
    /// while `work` ran, read back from the server's log; and a store on that database.
    static func recordedStatements(
        configure: (inout HeraldConfiguration) -> Void = { _ in }, _ work: (TestHerald) async throws -> Void
    ) async throws -> (Set<String>, PostgresStore) {
        let url = try await PostgresTestDatabase.create()
        let name = try #require(URLComponents(string: url)?.path.dropFirst()).description
        let admin = try PostgresStore.patient(url: url)
        TestResources.register { await admin.close() }
        let log = try await admin.withConnection { session in
            try await session.execute(PostgresQuery(unsafeSQL: "ALTER DATABASE \"\(name)\" SET log_statement = 'all'"))
            let data = try await session.row(PostgresQuery(unsafeSQL: "SHOW data_directory"))?.text("data_directory") ?? ""
            return URL(fileURLWithPath: data).deletingLastPathComponent().appendingPathComponent("server.log").path
        }
        // Herald's connections open after the setting, so each statement it sends is logged;
        // those of its start (the migrations' one-off backfills) are not the work's.
        let herald = try await TestHerald.make {
            configure(&$0)
            $0.database = url
        }
        let start = try await Self.logSize(log, admin)
        try await work(herald)
        let text = try await admin.withConnection { session in
            try await session.row(PostgresQuery(unsafeSQL: "SELECT pg_read_file('\(log)', \(start), 67108864) AS text"))?.text("text") ?? ""
        }
        return (Self.statements(inLog: text), admin)
    }

    /// A claim reads first attempts and retries each through an index whose condition is its
    /// kind's (DueDeliveriesSQL): through one index of every pending delivery, each claim's
    /// read of retries walked every first attempt due. A locking read keeps the index's
    /// condition as a filter (PostgreSQL checks it again on a row changed meanwhile), so the
    /// plan names each scan's kind below its index; the index's own definition must hold it.
    static func expectDueReadsThroughTheirKindsIndexes(_ statements: Set<String>, _ store: PostgresStore) async throws {
        // Reads in due order (claims, the next due time); an erasure's read of one user's queue
        // walks a pending index whichever it takes.
        let reads = statements.filter {
            $0.contains("FROM deliveries WHERE state = 'pending'") && $0.contains("attempts")
                && ($0.contains("ORDER BY next_attempt_at") || $0.contains("MIN(next_attempt_at)"))
        }
        var scans: [(index: String, kind: String)] = []
        for plan in try await Self.plans(reads, store).plans.values {
            var index: String?
            for line in plan {
                if let scan = line.firstMatch(of: /Index (?:Only )?Scan using (\w+) on/) { index = String(scan.1) }
                if let index, let kind = line.firstMatch(of: /\(attempts [=>] 0\)/) { scans.append((index, String(kind.0))) }
            }
        }
        #expect(Set(scans.map(\.kind)).count == 2, "both kinds read through an index: \(scans)\n\(reads)")
        let names = scans.map(\.index)
        let definitions = try await store.withConnection { session in
            try await session.rows("SELECT indexname, indexdef FROM pg_indexes WHERE indexname = ANY(\(names))")
                .reduce(into: [String: String]()) { $0[try $1.text("indexname")] = try $1.text("indexdef") }
        }
        for scan in scans {
            #expect(definitions[scan.index]?.contains(scan.kind) == true, "\(scan.kind) read through \(definitions[scan.index] ?? scan.index)")
        }
    }

    /// The log's size now; a server whose log is elsewhere (not `scripts/test`'s) fails here, saying so.
    static func logSize(_ path: String, _ store: PostgresStore) async throws -> Int64 {
        let size = try await store.withConnection { session in
            try await session.row(PostgresQuery(unsafeSQL: "SELECT size FROM pg_stat_file('\(path)', true)"))?.optionalInteger("size")
        }
        return try #require(size, "no server log at \(path): this test reads the log of scripts/test's PostgreSQL server")
    }

    /// The statements of the log's `LOG:  execute …:` and `LOG:  statement:` entries (an entry
    /// runs to the next line that starts with the server's line prefix, a time and a pid).
    static func statements(inLog text: String) -> Set<String> {
        var statements: Set<String> = []
        var entry = ""
        func finish() {
            if let match = entry.firstMatch(of: /LOG:  (?:execute [^:]*|statement): (?<sql>[\s\S]*)/) {
                statements.insert(String(match.sql).trimmingCharacters(in: .whitespacesAndNewlines))
            }
            entry = ""
        }
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.firstMatch(of: #/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? \w+ \[\d+\] /#) != nil { finish() }
            entry += line + "\n"
        }
        finish()
        return statements
    }

    /// The statements whose generic plan, with sequential scans disabled, still scans a table
    /// that grows, each with its plan line; and those that could not be planned on their own
    /// (a trigger's statements name its transition tables).
    static func fullScans(_ statements: Set<String>, _ store: PostgresStore) async throws -> (scans: [String], unplanned: [String]) {
        let (plans, unplanned) = try await Self.plans(statements, store)
        let scans = plans.sorted { $0.key < $1.key }.flatMap { sql, plan in
            plan.filter { line in line.firstMatch(of: /Seq Scan on (\w+)/).map { !small.contains(String($0.1)) } ?? false }
                .map { "\($0.trimmingCharacters(in: .whitespaces)): \(sql)" }
        }
        return (scans, unplanned)
    }

    /// Each plannable statement's generic plan, with sequential scans disabled, by line; and
    /// those that could not be planned on their own (a trigger's statements name its transition tables).
    static func plans(_ statements: Set<String>, _ store: PostgresStore) async throws -> (plans: [String: [String]], unplanned: [String]) {
        let planned = statements.filter(QueryPlanTests.isPlannable)
        return try await store.withConnection { session in
            try await session.execute("SET enable_seqscan = off")
            try await session.execute("SET plan_cache_mode = force_generic_plan")
            var plans: [String: [String]] = [:]
            var unplanned: [String] = []
            for sql in planned.sorted() {
                let parameters = sql.matches(of: /\$(\d+)/).compactMap { Int($0.1) }.max() ?? 0
                do {
                    try await session.execute(PostgresQuery(unsafeSQL: "PREPARE herald_plan AS " + sql))
                } catch {
                    unplanned.append(sql)
                    continue
                }
                let arguments = parameters == 0 ? "" : "(" + Array(repeating: "NULL", count: parameters).joined(separator: ", ") + ")"
                let plan = try await session.rows(PostgresQuery(unsafeSQL: "EXPLAIN EXECUTE herald_plan" + arguments))
                try await session.execute("DEALLOCATE herald_plan")
                plans[sql] = try plan.map { try $0.text("QUERY PLAN") }
            }
            return (plans, unplanned)
        }
    }
}
