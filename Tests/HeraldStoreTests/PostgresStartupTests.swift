import HeraldCore
import HeraldTestSupport
import Testing

@testable import HeraldStore

/// Starting on a PostgreSQL that is reachable but slow to lend a connection (every connection
/// taken, or authentication slow on a loaded machine) waits for it instead of failing after one
/// acquire timeout.
@Suite(.cleansUp) struct PostgresStartupTests {
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func migrationWaitsForABusyServer() async throws {
        let store = try PostgresStore(url: try await PostgresTestDatabase.create(), maxConnections: 2)
        TestResources.register { await store.close() }
        // Both of the pool's connections are held for longer than one acquire timeout (2 s).
        let (holding, held) = AsyncStream<Void>.makeStream()
        let holders = (0..<2).map { _ in
            Task {
                try await store.withConnection { _ in
                    held.yield()
                    try await Task.sleep(for: .seconds(3))
                }
            }
        }
        var holdersIn = 0
        for await _ in holding {
            holdersIn += 1
            if holdersIn == 2 { break }
        }
        let started = ContinuousClock.now
        try await store.migrate()
        #expect(ContinuousClock.now - started > PostgresStore.defaultAcquireTimeout, "the migration waited out a whole acquire timeout, and went on")
        for holder in holders { try await holder.value }
        #expect(try await store.settings(userID: "u") == UserSettings(), "the schema is in place")
    }
}
