import Foundation
import GRDB
import HeraldCore
import HeraldServer
import HeraldStore
import HeraldTestSupport
import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing

/// No request path scans a table that grows with the deployment (issue 62): every statement
/// SQLite runs while the API serves the seeds' flows is recorded, and its `EXPLAIN QUERY PLAN`
/// must not hold a full scan of a table that grows (history, notifications, deliveries, devices,
/// events, cards…). A statement that does is named with its plan, so a new query without an index fails
/// here before it crawls on a year of data.
@Suite(.cleansUp) struct QueryPlanTests {
    /// Tables that stay small whatever the traffic (keys, the Message Hub tree, the feed, facts):
    /// a scan of one of them is fine. Any other name a plan scans (a table, or a table's alias)
    /// is one that grows.
    static let small: Set<String> = [
        "api_keys", "areas", "channels", "subjects", "content_sets", "feed_messages", "herald_facts", "card_clock", "grdb_migrations",
        "sqlite_sequence", "sqlite_master", "sqlite_schema",
    ]

    final class Recorder: Sendable {
        private let statements = Mutex<Set<String>>([])
        func record(_ sql: String) { statements.withLock { _ = $0.insert(sql) } }
        var all: Set<String> { statements.withLock { $0 } }
    }

    @Test func noRequestPathScansAGrowingTable() async throws {
        let (store, recorder) = try await Self.recordedHerald { try await Self.exerciseRequestPaths($0) }
        let statements = recorder.all
        let (scans, control) = try await store.writer.read { db in
            (try Self.fullScans(statements, in: db), try Self.fullScans(["SELECT count(*) FROM history h WHERE h.type = ?"], in: db))
        }
        #expect(control.count == 1, "the check sees a scan, aliased or not")
        #expect(recorder.all.count > 30, "the workload ran: \(recorder.all.count) statements")
        #expect(scans.isEmpty, "\(scans.joined(separator: "\n"))")
    }

    /// A claim reads first attempts and retries each through its own kind's index, and so does
    /// the engine's look for the next due time (DueDeliveriesSQL): through one index of every
    /// pending delivery, each claim's read of retries walked every first attempt due. The same
    /// with a sink named (a circuit's probe) or left out (open circuits).
    @Test func dueDeliveriesAreReadThroughTheirKindsIndexes() async throws {
        let (store, recorder) = try await Self.recordedHerald { herald in
            try await herald.test { client in
                _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "ada"), json: js(["fcm_token": "ada-token"]))
                _ = try await client.call(
                    .post, "/api/notifications", headers(herald.backend), json: js(["type": "comment", "title": "T", "user_ids": ["ada"]]))
                try await herald.deliver()
            }
            let store = herald.server.store
            for sinks in [SinkFilter.all, .only("fcm"), .excluding(["fcm"])] {
                _ = try await store.nextDueDate(sinks: sinks)
                _ = try await store.claimDue(now: Date(), limit: 10, lease: .seconds(30), sinks: sinks)
            }
        }
        let reads = recorder.all.filter { $0.contains("FROM deliveries WHERE state = 'pending'") && $0.contains("next_attempt_at") }
        let plans = try await store.writer.read { db in
            try reads.map { sql in (sql, try Self.plan(of: sql, in: db)) }
        }
        #expect(plans.count >= 5, "the claim's two reads, and the next due time's for each filter: \(reads)")
        #expect(reads.contains { $0.contains("sink IN") } && reads.contains { $0.contains("sink NOT IN") }, "both filters ran")
        for (sql, plan) in plans {
            let indexes = ["deliveries_first_due": "attempts = 0", "deliveries_retry_due": "attempts > 0"].filter { sql.contains($0.value) }.keys
            #expect(!indexes.isEmpty, "a read of due deliveries names its kind: \(sql)")
            for index in indexes { #expect(plan.contains { ($0 + " ").contains("USING INDEX \(index) ") }, "\(sql)\n\(plan)") }
        }
    }

    /// A Herald on an in-memory SQLite database, configured by `configure`, with every statement
    /// `work` makes it run.
    static func recordedHerald(
        configure: (inout HeraldConfiguration) -> Void = { _ in }, _ work: (TestHerald) async throws -> Void
    ) async throws -> (SQLiteStore, Recorder) {
        let herald = try await TestHerald.make {
            configure(&$0)
            $0.database = "sqlite::memory:"
        }
        let store = try #require(herald.server.store as? SQLiteStore)
        let recorder = Recorder()
        // In memory the store is one connection (a DatabaseQueue): tracing it sees every statement.
        try await store.writer.writeWithoutTransaction { db in
            db.trace(options: .statement) { event in
                if case .statement(let statement) = event { recorder.record(statement.sql) }
            }
        }
        try await work(herald)
        return (store, recorder)
    }

    /// The seeds' flows through the API: devices, settings, sends of each target, delivery,
    /// history pages with cursors and state filters, the inbox, the feed, cards, pull, promote,
    /// events.
    static func exerciseRequestPaths(_ herald: TestHerald) async throws {
        try await herald.test { client in
            let backend = headers(herald.backend)
            let ada = headers(herald.backend, user: "ada")
            // Devices, settings, sends of each target, delivery, history pages, the inbox.
            _ = try await client.call(.post, "/api/notifications/register", ada, json: js(["fcm_token": "ada-token"]))
            _ = try await client.call(.patch, "/api/notifications/settings", ada, json: js(["timezone": "Europe/Paris"]))
            _ = try await client.call(.get, "/api/notifications/settings", ada)
            var ids: [String] = []
            for n in 0..<3 {
                let sent = try await client.call(
                    .post, "/api/notifications", backend, json: js(["type": "comment", "title": "T\(n)", "user_ids": ["ada", "bob"]]))
                ids.append(sent.object["id"] as? String ?? "")
            }
            _ = try await client.call(.post, "/api/notifications", backend, json: js(["type": "generic", "title": "All", "broadcast": true]))
            try await herald.deliver()
            _ = try await client.call(.get, "/api/notifications/history", ada)
            _ = try await client.call(.get, "/api/notifications/history?limit=1&before=\(ids[2])", ada)
            _ = try await client.call(.get, "/api/notifications/history?state=unread&type=comment", ada)
            _ = try await client.call(.get, "/api/inbox/counts", ada)
            _ = try await client.call(.post, "/api/inbox/mark", ada, json: js(["ids": [ids[0]], "change": "read"]))
            _ = try await client.call(.post, "/api/inbox/mark", ada, json: js(["all": true, "change": "archived"]))
            _ = try await client.call(.get, "/api/notifications/\(ids[1])", backend)
            // The feed and cards.
            _ = try await client.call(.get, "/feed/index.json", [:])
            _ = try await client.call(.put, "/api/cards/c1", backend, json: js(["metadata": [:], "posted_at": "2026-11-01T00:00:00Z", "hot": 0.5]))
            _ = try await client.call(.post, "/api/pool/scores", backend, json: js(["timestamp": 1, "users": ["ada": ["c1": 0.5]]]))
            _ = try await client.call(.get, "/api/pull", ada)
            _ = try await client.call(.post, "/api/pool/promote", ada)
            _ = try await client.call(
                .post, "/api/events", ada,
                json: js(["events": [["event_id": "e1", "type": "reaction", "reaction": "tfu", "card": "c1", "at": "2026-11-30T00:00:00Z"]]]))
            _ = try await client.call(.get, "/api/events/stats?card=c1", backend)
            // What a backend asks of one notification and one user, a scheduled send cancelled,
            // subscriptions, the queue's health and metrics, sign-out and erasure: each must be served, or
            // its statements are not the ones a request runs.
            func served(_ response: TestResponse, _ what: String) -> TestResponse {
                #expect(response.status.code < 300, "\(what): \(response.status) \(response.errorMessage)")
                return response
            }
            _ = served(try await client.call(.post, "/api/notifications/read", ada, json: js(["ids": [ids[1]]])), "read")
            _ = served(try await client.call(.get, "/api/notifications/\(ids[0])/recipients/ada", backend), "recipient")
            _ = served(
                try await client.call(
                    .post, "/api/notifications/explain", backend, json: js(["type": "comment", "title": "T", "user_ids": ["ada"], "user_id": "ada"])),
                "explain")
            let tomorrow = ISO8601DateFormatter().string(from: Date().addingTimeInterval(86_400))
            let later = served(
                try await client.call(
                    .post, "/api/notifications", backend, json: js(["type": "comment", "title": "Later", "user_ids": ["ada", "bob"], "send_at": tomorrow])),
                "scheduled")
            _ = served(try await client.call(.delete, "/api/notifications/\(later.object["id"] as? String ?? "")", backend), "cancel")
            _ = served(try await client.call(.get, "/api/notifications/subscriptions", ada), "subscriptions")
            _ = served(try await client.call(.get, "/health/sinks", headers(herald.admin)), "sinks' health")
            _ = served(try await client.call(.get, "/metrics", headers(herald.admin)), "metrics")
            _ = served(try await client.call(.put, "/api/users/bob", backend, json: js([String: String]())), "attributes")
            _ = served(try await client.call(.post, "/api/users/ada/sign-out", backend), "sign-out")
            _ = served(try await client.call(.delete, "/api/users/bob", backend), "erasure")
        }
    }

    /// Queries and changes only: EXPLAIN of a BEGIN or COMMIT would confuse the connection's
    /// transaction state.
    static func isPlannable(_ sql: String) -> Bool {
        ["SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "REPLACE"].contains {
            sql.trimmingCharacters(in: .whitespacesAndNewlines).uppercased().hasPrefix($0)
        }
    }

    /// The lines of `sql`'s query plan.
    static func plan(of sql: String, in db: Database) throws -> [String] {
        // Parameters left unbound are NULL to SQLite: the plan does not depend on them.
        let explain = try db.makeStatement(sql: "EXPLAIN QUERY PLAN " + sql)
        explain.setUncheckedArguments([])
        return try Row.fetchAll(explain).map { try $0.decode(forColumn: "detail") }
    }

    /// The statements among `statements` whose plan scans a whole table that grows, each with
    /// its plan line.
    static func fullScans(_ statements: Set<String>, in db: Database) throws -> [String] {
        let planned = statements.filter(isPlannable)
        var scans: [String] = []
        for sql in planned.sorted() {
            let details = try plan(of: sql, in: db)
            // A subquery's own rows ("SCAN (subquery-1)", or "SCAN due" for one named `due`,
            // which a "CO-ROUTINE due" or "MATERIALIZE due" line makes) are not a table: what
            // it reads has its own plan lines.
            let subqueries = Set(details.compactMap { $0.firstMatch(of: /^(?:CO-ROUTINE|MATERIALIZE) (\S+)$/).map { String($0.1) } })
            for detail in details {
                // "SCAN t" (a full table scan), not "SCAN t USING INDEX …" (an ordered index walk,
                // which a LIMIT ends) nor "SEARCH t …".
                let words = detail.split(separator: " ")
                if words.count == 2, words[0] == "SCAN", !words[1].hasPrefix("("), !subqueries.contains(String(words[1])), !small.contains(String(words[1])) {
                    scans.append("\(detail): \(sql)")
                }
            }
        }
        return scans
    }
}
