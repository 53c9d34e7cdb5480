import PostgresNIO
import Testing

@testable import HeraldStore

extension PostgresStore {
    /// Polls until `count` sessions of this database wait on a lock, `stop` says to, or 10 s
    /// pass; the number seen last.
    func waitForLockWaiters(_ count: Int, orUntil stop: @Sendable () -> Bool = { false }) async throws -> Int {
        var waiting = 0
        for _ in 0..<400 where waiting < count && !stop() {
            try await Task.sleep(for: .milliseconds(25))
            waiting = try await withConnection { session in
                try await session.count("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")
            }
        }
        return waiting
    }

    /// Polls until a session of this database waits on a lock, then returns the modes it holds
    /// on `relation`; nil when `stop` says to or 10 s pass first.
    func locksHeldWhileWaiting(on relation: String, until stop: @Sendable () -> Bool) async throws -> [String]? {
        let query = PostgresQuery(
            unsafeSQL: """
                SELECT w.pid, array_remove(array_agg(g.mode::text), NULL) AS modes FROM pg_locks w
                LEFT JOIN pg_locks g ON g.pid = w.pid AND g.granted AND g.relation = to_regclass('\(relation)')
                WHERE NOT w.granted AND w.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                GROUP BY w.pid
                """)
        for _ in 0..<2000 where !stop() {
            if let waiting = try await withConnection({ session in try await session.row(query) }) {
                return try waiting.cell("modes").decode([String].self)
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        return nil
    }
}
