import PostgresNIO
import Testing

@testable import HeraldStore

/// Another transaction holding what it locked, uncommitted, until ``rollBack()``: the tests of
/// lock order stop a writer at a lock of their choosing with it.
struct PostgresLockHolder {
    struct RolledBack: Error {}
    let task: Task<Void, any Error>
    let release: AsyncStream<Void>.Continuation

    /// Returns once `lock` has run in a transaction that stays open.
    static func start(_ store: PostgresStore, locking lock: @escaping @Sendable (PostgresSession) async throws -> Void) async -> Self {
        let (held, holding) = AsyncStream.makeStream(of: Void.self)
        let (release, releasing) = AsyncStream.makeStream(of: Void.self)
        let task = Task {
            try await store.transaction { session in
                try await lock(session)
                holding.yield()
                for await _ in release { break }
                throw RolledBack()
            }
        }
        for await _ in held { break }
        return Self(task: task, release: releasing)
    }

    func rollBack() async {
        release.yield()
        await #expect(throws: RolledBack.self) { try await task.value }
    }
}

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
