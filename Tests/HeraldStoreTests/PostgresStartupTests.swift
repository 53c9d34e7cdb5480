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

    /// A server that refuses the login (a database that does not exist, a role it does not
    /// know, no TLS where it is required) looked like a slow one: PostgresNIO's pool logs the
    /// refusal and keeps the request waiting, so start-up waited out its patience and then said
    /// only that the database was unreachable. The check for an outage now logs in on a
    /// connection of its own, and the error says why, as it does for an address that refuses
    /// connections.
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aRefusedLoginIsNamed() async throws {
        let server = try #require(PostgresTestDatabase.serverURL)
        let base = try #require(server.firstMatch(of: /^(postgres(?:ql)?:\/\/)([^@\/]*@)?([^\/?]*)/))
        let missing = "herald_missing_\(UInt32.random(in: 0...UInt32.max))"
        let cases = [
            ("\(base.1)\(base.2 ?? "")\(base.3)/\(missing)", "the server refused the connection: database \"\(missing)\" does not exist"),
            ("\(base.1)nobody_\(missing)@\(base.3)/postgres", "the server refused the connection: role \"nobody_\(missing)\" does not exist"),
            // scripts/test's server offers no TLS.
            ("\(base.1)\(base.2 ?? "")\(base.3)/postgres?sslmode=require", "the server does not offer TLS, which sslmode=require asks for"),
            ("postgres://herald@127.0.0.1:1/herald", "nothing accepts connections at 127.0.0.1:1 (Connection refused)"),
        ]
        for (url, said) in cases {
            let store = try PostgresStore(url: url)
            TestResources.register { await store.close() }
            for attempt in [{ _ = try await store.migrate() }, { _ = try await store.holdsSchema() }] as [@Sendable () async throws -> Void] {
                let error = await #expect(throws: HeraldError.self) { try await attempt() }
                #expect(error?.message.hasSuffix(": \(said)") == true, "\(error?.message ?? "")")
            }
        }
    }
}
