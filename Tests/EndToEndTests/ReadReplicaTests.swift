import Foundation
import HeraldTestSupport
import NIOHTTP1
import Testing

/// docs/scaling.md, "Read replicas for history reads", on the real binaries: Herald processes on
/// one PostgreSQL primary with a streaming replica of it (`database_read_url`). History pages
/// are read on the replica while it is current and on the primary otherwise; inbox counts are
/// always read on the primary; a process killed with SIGKILL loses nothing.
@Suite(.serialized, .cleansUp) struct ReadReplicaTests {
    let directory: URL

    init() throws {
        directory = try TestResources.temporaryDirectory("herald-replica")
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "needs PostgreSQL's binaries, which ./scripts/test installs"))
    func historyPagesAreReadOnTheReplicaAndAKilledProcessLosesNothing() async throws {
        try await ReplicaPair.with(in: directory) { pair in
            let (emulator, account) = try await LoadHarness.startFCMEmulator(in: directory)
            let key = try await LoadHarness.backendKey(database: pair.primary, in: directory)
            let environment = LoadHarness.fcmEnvironment(account: account, emulator: emulator)
            let a = try await RunningHerald(arguments: pair.arguments, environment: environment, in: directory)
            let b = try await RunningHerald(arguments: pair.arguments, environment: environment, in: directory)
            for herald in [a, b] { #expect(try await herald.logged(ReplicaPair.current), "\(herald.output.stderr)") }
            let users = (0..<10).map { "replica-user-\($0)" }
            try await LoadHarness.registerUsers(users, at: a.url, key: key)
            let scansBefore = try await pair.historyScansOnReplica()

            // Half the load goes to a process killed after 400 accepts; its leased work is the
            // survivor's, which takes 400 more (a dead server would hold each request sent to it
            // for the client's whole timeout).
            let killed = Locked(false)
            let beforeKill = await LoadHarness.send(800, to: [a.url, b.url], users: users, key: key, afterAccept: LoadHarness.killing(a, after: 400, killed))
            _ = await a.stop()
            let accepted = beforeKill + (await LoadHarness.send(400, to: [b.url], users: users, key: key))
            #expect(killed.withLock { $0 } && accepted.count >= 800, "\(accepted.count) accepted around the kill")
            let pushed = try await LoadHarness.waitForPushes(of: Set(accepted), emulator: emulator.url, timeout: .seconds(90))
            #expect(Set(accepted).subtracting(pushed).isEmpty, "\(Set(accepted).subtracting(pushed).count) accepted notifications were never pushed")

            // Pages from the replica may lag by up to a second; within a few, each accepted
            // notification is there, once.
            var history: [String] = []
            let deadline = ContinuousClock.now + .seconds(30)
            repeat {
                history = try await LoadHarness.history(of: users, at: b.url, key: key)
                if Set(accepted).isSubset(of: Set(history)) { break }
                try await Task.sleep(for: .milliseconds(250))
            } while ContinuousClock.now < deadline
            #expect(Set(accepted).isSubset(of: Set(history)), "\(Set(accepted).subtracting(history).count) accepted notifications missing from history")
            #expect(history.count == Set(history).count, "no notification twice in a history")
            // PostgreSQL's statistics on the replica count the scans of `history` it served
            // (published within seconds of each read).
            var scansAfter = scansBefore
            for _ in 0..<80 where scansAfter < scansBefore + users.count {
                try await Task.sleep(for: .milliseconds(250))
                scansAfter = try await pair.historyScansOnReplica()
            }
            #expect(scansAfter >= scansBefore + users.count, "the replica served history pages (\(scansBefore) -> \(scansAfter) scans)")

            // A mark on one process is in the counts the next moment on another: counts are the primary's.
            let again = try await RunningHerald(arguments: pair.arguments, environment: environment, in: directory)
            let user = users[0]
            let unread = try await Self.unread(at: again.url, user: user, key: key)
            let first = try #require(try await LoadHarness.history(of: [user], at: b.url, key: key).first)
            let (status, marked) = try await LoadHarness.request(
                .POST, "\(b.url)/api/inbox/mark", key: key, user: user, body: "{\"ids\":[\"\(first)\"],\"change\":\"read\"}")
            #expect(status == 200 && marked["unread"] as? Int == unread - 1, "\(status) \(marked)")
            #expect(try await Self.unread(at: again.url, user: user, key: key) == unread - 1)
            await again.expectCleanStop()
            await b.expectCleanStop()
            _ = await emulator.stop()
        }
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "needs PostgreSQL's binaries, which ./scripts/test installs"))
    func aReplicaBehindOrStoppedLeavesHistoryPagesToThePrimary() async throws {
        try await ReplicaPair.with(in: directory) { pair in
            let key = try await LoadHarness.backendKey(database: pair.primary, in: directory)
            let herald = try await RunningHerald(arguments: pair.arguments, in: directory)
            #expect(try await herald.logged(ReplicaPair.current), "\(herald.output.stderr)")

            // Replay paused: the replica never holds what is sent now, so a page that shows it came from the primary.
            _ = try await pair.sql(pair.replica, "SELECT pg_wal_replay_pause()")
            let held = try await Self.send(to: herald.url, key: key)
            #expect(try await Self.shows(held, at: herald.url, key: key), "a page shows what the paused replica lacks")
            #expect(try await herald.logged("the read replica is more than"), "\(herald.output.stderr)")

            _ = try await pair.sql(pair.replica, "SELECT pg_wal_replay_resume()")
            #expect(try await herald.logged(ReplicaPair.current, times: 2), "the replica is used again once it caught up")

            // The replica gone: pages are still answered, and current.
            try await pair.stopReplica()
            let afterOutage = try await Self.send(to: herald.url, key: key)
            #expect(try await Self.shows(afterOutage, at: herald.url, key: key), "pages are answered from the primary without the replica")
            #expect(try await herald.logged("history pages are read on the primary", times: 2), "\(herald.output.stderr)")
            await herald.expectCleanStop()
        }
    }

    @Test func aReadURLNeedsAPostgreSQLDatabaseAndAUsableURL() async throws {
        let sqlite = try await runCommand(
            Binaries.path("herald"),
            ["serve", "--port", "0", "--database", "sqlite:replica.sqlite", "--database-read-url", "postgres://herald@127.0.0.1:1/herald"],
            in: directory, timeout: .seconds(30))
        #expect(sqlite.status == 1 && sqlite.stderr.contains("database_read_url names a PostgreSQL replica"), "\(sqlite.stderr)")
        let unusable = try await runCommand(
            Binaries.path("herald"), ["serve", "--port", "0", "--database", "postgres://herald@127.0.0.1:1/herald", "--database-read-url", "mysql://x"],
            in: directory, timeout: .seconds(30))
        #expect(unusable.status == 1 && unusable.stderr.contains("database_read_url URL is not usable: not a postgres:// URL"), "\(unusable.stderr)")
    }
}

extension ReadReplicaTests {
    /// Sends one notification to `replica-probe` (no devices: the history sink alone) and returns its id.
    static func send(to url: String, key: String) async throws -> String {
        let (status, reply) = try await LoadHarness.request(
            .POST, "\(url)/api/notifications", key: key, body: #"{"type":"generic","title":"t","user_ids":["replica-probe"]}"#)
        guard status == 202, let id = reply["id"] as? String else { throw HarnessError("send answered \(status): \(reply)") }
        return id
    }

    /// Whether a history page of `replica-probe` shows `id` within 20 s; every page must be a 200.
    static func shows(_ id: String, at url: String, key: String) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let (status, page) = try await LoadHarness.request(.GET, "\(url)/api/notifications/history", key: key, user: "replica-probe")
            guard status == 200 else { throw HarnessError("a history page answered \(status): \(page)") }
            let ids = (page["history"] as? [[String: Any]] ?? []).compactMap { ($0["data"] as? [String: Any])?["id"] as? String }
            if ids.contains(id) { return true }
            try await Task.sleep(for: .milliseconds(200))
        }
        return false
    }

    static func unread(at url: String, user: String, key: String) async throws -> Int {
        let (status, counts) = try await LoadHarness.request(.GET, "\(url)/api/inbox/counts", key: key, user: user)
        guard status == 200, let unread = counts["unread"] as? Int else { throw HarnessError("counts answered \(status): \(counts)") }
        return unread
    }
}

/// A PostgreSQL primary and a streaming replica of it, started by scripts/postgres-replica-pair.
struct ReplicaPair: Sendable {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/postgres-replica-pair").path
    /// What Herald logs when it starts (or goes back to) reading pages on the replica.
    static let current = "the read replica is current"

    let folder: String
    let primary: String
    let replica: String
    let directory: URL

    /// `herald serve`'s options for the pair.
    var arguments: [String] { ["--database", primary, "--database-read-url", replica] }

    /// Runs `body` with a new pair, which is stopped and deleted afterwards, whatever `body` did.
    static func with(in directory: URL, _ body: (ReplicaPair) async throws -> Void) async throws {
        let started = try await runCommand(script, ["start"], in: directory, timeout: .seconds(120))
        var values: [String: String] = [:]
        for line in started.stdout.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
        }
        guard started.status == 0, let folder = values["folder"], let primary = values["primary"], let replica = values["replica"] else {
            throw HarnessError("postgres-replica-pair start exited \(started.status): \(started.stdout)\(started.stderr)")
        }
        let pair = ReplicaPair(folder: folder, primary: primary, replica: replica, directory: directory)
        do {
            try await body(pair)
        } catch {
            await pair.stop()
            throw error
        }
        await pair.stop()
    }

    func sql(_ url: String, _ statement: String) async throws -> String {
        let result = try await runCommand(Self.script, ["sql", url, statement], in: directory, timeout: .seconds(30))
        guard result.status == 0 else { throw HarnessError("\(statement) failed: \(result.stderr)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Index and sequential scans of `history` that the replica has served.
    func historyScansOnReplica() async throws -> Int {
        // History's months are counted each on its own (a partitioned table has no scans of its own).
        let text = try await sql(
            replica,
            """
            SELECT COALESCE(SUM(idx_scan + seq_scan), 0) FROM pg_stat_user_tables
            WHERE relname = 'history' OR relid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'history'::regclass)
            """)
        guard let scans = Int(text) else { throw HarnessError("scans read as '\(text)'") }
        return scans
    }

    func stopReplica() async throws {
        let result = try await runCommand(Self.script, ["stop-replica", folder], in: directory, timeout: .seconds(60))
        guard result.status == 0 else { throw HarnessError("stopping the replica failed: \(result.stderr)") }
    }

    func stop() async {
        _ = try? await runCommand(Self.script, ["stop", folder], in: directory, timeout: .seconds(60))
    }
}

extension RunningHerald {
    /// Whether the process's log holds `text` at least `times` times within `timeout`.
    func logged(_ text: String, times: Int = 1, timeout: Duration = .seconds(20)) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if output.stderr.components(separatedBy: text).count - 1 >= times { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return false
    }
}
