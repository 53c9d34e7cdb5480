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
}
