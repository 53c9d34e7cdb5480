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
        let herald = try await TestHerald.make { $0.database = "sqlite::memory:" }
        let store = try #require(herald.server.store as? SQLiteStore)
        let recorder = Recorder()
        // In memory the store is one connection (a DatabaseQueue): tracing it sees every statement.
        try await store.writer.writeWithoutTransaction { db in
            db.trace(options: .statement) { event in
                if case .statement(let statement) = event { recorder.record(statement.sql) }
            }
        }
        try await Self.exerciseRequestPaths(herald)
        let statements = recorder.all
        let (scans, control) = try await store.writer.read { db in
            (try Self.fullScans(statements, in: db), try Self.fullScans(["SELECT count(*) FROM history h WHERE h.type = ?"], in: db))
        }
        #expect(control.count == 1, "the check sees a scan, aliased or not")
        #expect(recorder.all.count > 30, "the workload ran: \(recorder.all.count) statements")
        #expect(scans.isEmpty, "\(scans.joined(separator: "\n"))")
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
        }
    }

    /// Queries and changes only: EXPLAIN of a BEGIN or COMMIT would confuse the connection's
    /// transaction state.
    static func isPlannable(_ sql: String) -> Bool {
        ["SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "REPLACE"].contains {
            sql.trimmingCharacters(in: .whitespacesAndNewlines).uppercased().hasPrefix($0)
        }
    }

    /// The statements among `statements` whose plan scans a whole table that grows, each with
    /// its plan line.
    static func fullScans(_ statements: Set<String>, in db: Database) throws -> [String] {
        let planned = statements.filter(isPlannable)
        var scans: [String] = []
        for sql in planned.sorted() {
            // Parameters left unbound are NULL to SQLite: the plan does not depend on them.
            let explain = try db.makeStatement(sql: "EXPLAIN QUERY PLAN " + sql)
            explain.setUncheckedArguments([])
            for row in try Row.fetchAll(explain) {
                let detail: String = try row.decode(forColumn: "detail")
                // "SCAN t" (a full table scan), not "SCAN t USING INDEX …" (an ordered index walk,
                // which a LIMIT ends) nor "SEARCH t …".
                let words = detail.split(separator: " ")
                if words.count == 2, words[0] == "SCAN", !small.contains(String(words[1])) { scans.append("\(detail): \(sql)") }
            }
        }
        return scans
    }
}
