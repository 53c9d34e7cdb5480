import HeraldStore
import PostgresNIO
import Testing

/// Another transaction holding what it locked, uncommitted, until ``rollBack()``: the tests of
/// lock order stop a writer at a lock of their choosing with it, and the tests of online schema
/// changes stand in for a long query with it.
package struct PostgresLockHolder: Sendable {
    struct RolledBack: Error {}
    let task: Task<Void, any Error>
    let release: AsyncStream<Void>.Continuation

    /// Returns once `lock` has run in a transaction that stays open.
    package static func start(_ store: PostgresStore, locking lock: @escaping @Sendable (PostgresSession) async throws -> Void) async -> Self {
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

    /// Runs `statement` (a `LOCK TABLE`, say) on a store of its own on `url`, closed once rolled back.
    package static func start(url: String, running statement: String) async throws -> Self {
        let store = try PostgresStore(url: url, maxConnections: 1)
        TestResources.register { await store.close() }
        return await start(store) { session in try await session.execute(PostgresQuery(unsafeSQL: statement)) }
    }

    package func rollBack() async {
        release.yield()
        await #expect(throws: RolledBack.self) { try await task.value }
    }
}
