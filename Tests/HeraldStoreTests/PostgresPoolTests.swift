import Foundation
import HeraldCore
import HeraldTestSupport
import Logging
import PostgresNIO
import Testing

@testable import HeraldStore

/// `PostgresPool`'s rules, each shown by what it did rather than by how fast: an outage is
/// answered at once while a probe looks for the database, a fresh pool replaces the backed-off
/// one when it is back, and a pool that is only busy is not taken for an outage. The outage is
/// played by a TCP proxy between the pool and the test server (the end-to-end tests' own).
@Suite(.serialized, .timeLimit(.minutes(2)), .cleansUp) struct PostgresPoolTests {
    /// The outage proxy in front of the test server: SIGUSR1 cuts every connection and closes
    /// the port, SIGUSR2 opens it again.
    struct Proxy {
        let process: SpawnedProcess
        let url: String
        let output: String

        static func start(before server: String) async throws -> Proxy {
            var database = try #require(URLComponents(string: server))
            let directory = try TestResources.temporaryDirectory("herald-pool")
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("EndToEndTests/outage_proxy.py").path
            let output = directory.appendingPathComponent("proxy.out").path
            let process = SpawnedProcess(
                executable: "/usr/bin/env", arguments: ["python3", script, database.host ?? "127.0.0.1", String(database.port ?? 5432)],
                environment: ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"], stdoutPath: output,
                stderrPath: directory.appendingPathComponent("proxy.err").path)
            try process.run()
            TestResources.register {
                process.terminate()
                _ = await process.waitForExit()
            }
            var port: Int?
            for _ in 0..<200 where port == nil {
                let printed = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
                port = printed.firstMatch(of: /proxy listening on (\d+)/).flatMap { Int($0.1) }
                if port == nil { try await Task.sleep(for: .milliseconds(50)) }
            }
            database.port = try #require(port, "the proxy did not start")
            return Proxy(process: process, url: try #require(database.string), output: output)
        }

        func cut() async throws { try await send(SIGUSR1, until: "outage") }
        func stall() async throws { try await send(SIGHUP, until: "stalled") }
        func restore() async throws { try await send(SIGUSR2, until: "resumed") }

        /// Signals the proxy and waits for its word that the change is in effect.
        private func send(_ signal: Int32, until word: String) async throws {
            func said() -> Int { ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").split(separator: "\n").filter { $0 == word }.count }
            let before = said()
            process.signal(signal)
            let deadline = ContinuousClock.now + .seconds(30)
            while said() == before {
                guard ContinuousClock.now < deadline else { throw ProxyError(description: "the proxy did not say '\(word)'") }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
    }

    struct ProxyError: Error, CustomStringConvertible {
        var description: String
    }

    /// A pool with timeouts a loaded machine's first connections fit in (a full suite on two
    /// cores took more than a second for one, through the proxy).
    static func pool(_ url: String, maxConnections: Int = 4, acquireTimeout: Duration = .seconds(5)) throws -> PostgresPool {
        var configuration = try PostgresStore.configuration(url: url)
        configuration.options.maximumConnections = maxConnections
        let pool = PostgresPool(configuration: configuration, logger: Logger(label: "test"), acquireTimeout: acquireTimeout, probeInterval: .milliseconds(100))
        TestResources.register { await pool.close() }
        return pool
    }

    static func selectOne(_ pool: PostgresPool) async throws -> Int {
        try await pool.withConnection { connection in
            var answer = 0
            for try await value in try await connection.query("SELECT 1", logger: Logger(label: "test")).decode(Int.self) { answer = value }
            return answer
        }
    }

    /// Whether `stream` yielded before it finished (a holder signalling it has its connection).
    static func signalled(_ stream: AsyncStream<Void>) async -> Bool {
        for await _ in stream { return true }
        return false
    }

    /// Polls `condition` for up to `seconds`; a loaded machine may take a while, and the
    /// assertions that follow say what happened, not how soon.
    static func eventually(_ seconds: Int = 30, _ condition: () -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !condition() {
            if ContinuousClock.now > deadline { return false }
            try await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func anOutageIsAnsweredAtOnceAndAFreshPoolSwappedInWhenItEnds() async throws {
        let proxy = try await Proxy.start(before: try await PostgresTestDatabase.create())
        let pool = try Self.pool(proxy.url)
        #expect(try await Self.selectOne(pool) == 1)
        let before = pool.client

        try await proxy.cut()
        // The first request after the cut finds its connection gone (or gets none) and is a 503.
        await #expect(throws: HeraldError.self) { _ = try await Self.selectOne(pool) }
        #expect(try await Self.eventually { !pool.isReachable }, "the outage was noticed")
        // While the database is away every request fails at once, without waiting on the pool,
        // and says since when.
        do {
            _ = try await Self.selectOne(pool)
            Issue.record("a request during the outage succeeded")
        } catch let error as HeraldError {
            #expect(error.code == "storage_unavailable" && error.message.contains("unreachable since"), "\(error.message)")
        }
        // Long enough for PostgresNIO's own pool to back off between its attempts.
        try await Task.sleep(for: .seconds(2))
        #expect(pool.client === before, "the pool is not replaced while nothing answers")

        try await proxy.restore()
        #expect(try await Self.eventually { pool.isReachable }, "the probe found the database again")
        #expect(pool.client !== before, "a fresh pool, not the backed-off one, serves requests")
        #expect(try await Self.selectOne(pool) == 1)
    }

    /// At startup a server that answers nothing in time (a loaded machine's, here one whose
    /// proxy holds every byte) is waited for, even once the pool's own check has marked it
    /// unreachable; one that refuses connections fails the start at once.
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func startupWaitsForASlowServerAndNotForADownOne() async throws {
        let proxy = try await Proxy.start(before: try await PostgresTestDatabase.create())
        try await proxy.stall()
        let slow = try PostgresStore(url: proxy.url)
        TestResources.register { await slow.close() }
        let migration = Task { try await slow.migrate() }
        #expect(try await Self.eventually { slow.pool.isUnreachableForSlowness }, "the check found nothing answering")
        try await Task.sleep(for: .milliseconds(500))
        try await proxy.restore()
        try await migration.value
        #expect(try await slow.settings(userID: "u") == UserSettings(), "migrated once the server answered")

        try await proxy.cut()
        let down = try PostgresStore(url: proxy.url, acquireTimeout: .milliseconds(300))
        TestResources.register { await down.close() }
        let started = ContinuousClock.now
        do {
            try await down.migrate()
            Issue.record("a start against a closed port succeeded")
        } catch let error as HeraldError {
            #expect(error.code == "storage_unavailable", "\(error.message)")
        }
        #expect(ContinuousClock.now - started < PostgresStore.startupPatience / 2, "a refused connection is not waited for")
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aBusyPoolIsNotAnOutage() async throws {
        let pool = try Self.pool(try await PostgresTestDatabase.create(), maxConnections: 1)
        #expect(try await Self.selectOne(pool) == 1)
        let before = pool.client
        let (holding, held) = AsyncStream<Void>.makeStream()
        let holder = Task {
            defer { held.finish() }
            try await pool.withConnection { _ in
                held.yield()
                try await Task.sleep(for: .seconds(12))
            }
        }
        guard await Self.signalled(holding) else {
            Issue.record("the holder got no connection: \(String(describing: await holder.result))")
            return
        }
        do {
            _ = try await Self.selectOne(pool)
            Issue.record("a request got a connection the holder had")
        } catch let error as HeraldError {
            #expect(error == PostgresPool.busy, "\(error.message)")
        }
        // The timeout started a check with a connection of its own, which connects: the pool
        // stays reachable and is not replaced.
        try await holder.value
        #expect(pool.isReachable, "a busy pool was taken for an outage")
        #expect(pool.client === before)
        #expect(try await Self.selectOne(pool) == 1)
        // The check's own connection closes once it has answered; left open, every busy
        // moment would cost the server a connection for good.
        var open = 0
        let deadline = ContinuousClock.now + .seconds(15)
        repeat {
            open = try await pool.withConnection { connection in
                var count = 0
                let rows = try await connection.query(
                    "SELECT count(*)::int FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'",
                    logger: Logger(label: "test"))
                for try await value in rows.decode(Int.self) { count = value }
                return count
            }
            if open > 1 { try await Task.sleep(for: .milliseconds(100)) }
        } while open > 1 && ContinuousClock.now < deadline
        #expect(open == 1, "connections to the database besides the pool's one")
    }

    /// A request that held a connection of the old pool through the outage fails once the fresh
    /// pool has replaced it, and says so: that failure says nothing of the database, so the
    /// fresh pool stays in use and reachable.
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aRequestLeftOnTheReplacedPoolDoesNotMarkTheFreshOne() async throws {
        let proxy = try await Proxy.start(before: try await PostgresTestDatabase.create())
        let pool = try Self.pool(proxy.url)
        #expect(try await Self.selectOne(pool) == 1)
        let before = pool.client
        let (holding, held) = AsyncStream<Void>.makeStream()
        let (going, go) = AsyncStream<Void>.makeStream()
        let holder = Task {
            defer { held.finish() }
            return try await pool.withConnection { connection in
                held.yield()
                for await _ in going { break }
                var answer = 0
                for try await value in try await connection.query("SELECT 1", logger: Logger(label: "test")).decode(Int.self) { answer = value }
                return answer
            }
        }
        guard await Self.signalled(holding) else {
            Issue.record("the holder got no connection: \(String(describing: await holder.result))")
            return
        }

        try await proxy.cut()
        await #expect(throws: HeraldError.self) { _ = try await Self.selectOne(pool) }
        #expect(try await Self.eventually { !pool.isReachable }, "the outage was noticed")
        try await proxy.restore()
        #expect(try await Self.eventually { pool.isReachable && pool.client !== before }, "a fresh pool replaced the old one")
        let fresh = pool.client

        go.yield()
        go.finish()
        do {
            let answer = try await holder.value
            Issue.record("a connection cut by the outage answered \(answer)")
        } catch let error as HeraldError {
            #expect(error == PostgresPool.replaced, "\(error.message)")
        }
        #expect(pool.isReachable, "the old pool's failure marked the fresh one unreachable")
        #expect(pool.client === fresh)
        #expect(try await Self.selectOne(pool) == 1)
    }
}
