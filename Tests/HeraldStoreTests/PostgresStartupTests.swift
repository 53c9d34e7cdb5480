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
        // Both of the pool's connections are held for longer than one acquire timeout (2 s),
        // until released. A holder whose own acquire timed out (opening a connection takes
        // longer than that on a loaded machine) tries again: it used to end without a word, and
        // the test waited for it forever.
        let (holding, held) = AsyncStream<Bool>.makeStream()
        let releases = (0..<2).map { _ in AsyncStream<Void>.makeStream() }
        let holders = releases.map { released, _ in
            Task {
                let deadline = ContinuousClock.now + .seconds(60)
                while true {
                    do {
                        try await store.withConnection { _ in
                            held.yield(true)
                            for await _ in released {}
                        }
                        return
                    } catch  where ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(100))
                    } catch {
                        held.yield(false)
                        throw error
                    }
                }
            }
        }
        var holdersIn = 0
        for await holds in holding {
            try #require(holds, "a holder could not take a connection within a minute")
            holdersIn += 1
            if holdersIn == 2 { break }
        }
        let releasing = Task {
            try await Task.sleep(for: .seconds(3))
            for (_, release) in releases { release.finish() }
        }
        let started = ContinuousClock.now
        try await store.migrate()
        #expect(ContinuousClock.now - started > PostgresStore.defaultAcquireTimeout, "the migration waited out a whole acquire timeout, and went on")
        try await releasing.value
        for holder in holders { try await holder.value }
        #expect(try await store.settings(userID: "u") == UserSettings(), "the schema is in place")
    }
}
