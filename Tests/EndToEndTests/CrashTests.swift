import Foundation
import HeraldTestSupport
import NIOHTTP1
import Synchronization
import Testing

/// The promises of docs/durability.md on the real binary: a kill -9 under load loses no accepted notification, and history
/// stays exactly-once; on PostgreSQL, several processes share the work without duplicates.
@Suite(.serialized, .cleansUp) struct CrashTests {
    let directory: URL

    init() throws {
        directory = try TestResources.temporaryDirectory("herald-crash")
    }

    func fcmEnvironment(account: String, emulator: RunningHerald, lease: String = "1.5") -> [String: String] {
        LoadHarness.fcmEnvironment(account: account, emulator: emulator, lease: lease)
    }

    func startEmulator() async throws -> (RunningHerald, String) {
        try await LoadHarness.startFCMEmulator(in: directory)
    }

    @Test(arguments: DatabaseKind.available)
    func killDashNineUnderLoadLosesNothingAccepted(_ kind: DatabaseKind) async throws {
        let database = try await kind.make(in: directory)
        let (emulator, account) = try await startEmulator()
        let key = try await LoadHarness.backendKey(database: database, in: directory)
        let environment = fcmEnvironment(account: account, emulator: emulator)
        let first = try await RunningHerald(arguments: ["--database", database], environment: environment, in: directory)
        let users = (0..<20).map { "crash-user-\($0)" }
        try await LoadHarness.registerUsers(users, at: first.url, key: key)

        // Load: 4000 notifications at 16 in flight; kill -9 once 1500 were accepted.
        let killed = Locked(false)
        let accepted = await LoadHarness.send(4_000, to: [first.url], users: users, key: key, afterAccept: LoadHarness.killing(first, after: 1_500, killed))
        #expect(killed.withLock { $0 }, "the server was killed mid-load")
        _ = await first.stop()
        #expect(accepted.count >= 1_500 && accepted.count < 4_000)

        // Restart on the same database: the new process picks up pending and leased work.
        let second = try await RunningHerald(arguments: ["--database", database], environment: environment, in: directory)
        let acceptedIDs = Set(accepted)
        let pushed = try await LoadHarness.waitForPushes(of: acceptedIDs, emulator: emulator.url)
        #expect(acceptedIDs.subtracting(pushed).isEmpty, "\(acceptedIDs.subtracting(pushed).count) accepted notifications were never pushed")

        let history = try await LoadHarness.history(of: users, at: second.url, key: key)
        #expect(history.count == Set(history).count, "no notification twice in a history")
        #expect(acceptedIDs.isSubset(of: Set(history)), "\(acceptedIDs.subtracting(history).count) accepted notifications missing from history")
        await second.expectCleanStop()
        _ = await emulator.stop()
    }

    @Test(.enabled(if: DatabaseKind.available.contains(.postgres), "needs the PostgreSQL test server"))
    func twoProcessesOnOnePostgresPushEachNotificationOnce() async throws {
        let database = try await DatabaseKind.postgres.make(in: directory)
        let (emulator, account) = try await startEmulator()
        let key = try await LoadHarness.backendKey(database: database, in: directory)
        let environment = fcmEnvironment(account: account, emulator: emulator, lease: "30")
        let a = try await RunningHerald(arguments: ["--database", database], environment: environment, in: directory)
        let b = try await RunningHerald(arguments: ["--database", database], environment: environment, in: directory)
        let users = (0..<20).map { "pair-user-\($0)" }
        try await LoadHarness.registerUsers(users, at: a.url, key: key)

        let accepted = await LoadHarness.send(2_000, to: [a.url, b.url], users: users, key: key)
        #expect(accepted.count == 2_000)
        let pushed = try await LoadHarness.waitForPushes(of: Set(accepted), emulator: emulator.url)
        // A late repeat could only come from a delivery still pending: wait until every push
        // is recorded delivered, then count.
        #expect(try await recordedDelivered(accepted, at: b.url, key: key), "every push is recorded as delivered")
        let final = try await LoadHarness.pushes(emulator: emulator.url)
        #expect(Set(pushed) == Set(accepted))
        #expect(final.count == accepted.count, "\(final.count - accepted.count) duplicate pushes")

        let history = try await LoadHarness.history(of: users, at: b.url, key: key)
        #expect(history.count == accepted.count && Set(history) == Set(accepted), "history holds each notification exactly once")
        await a.expectCleanStop()
        await b.expectCleanStop()
        _ = await emulator.stop()
    }

    @Test(.enabled(if: DatabaseKind.available.contains(.postgres), "needs the PostgreSQL test server"))
    func survivorDeliversWhatAKilledProcessHadLeased() async throws {
        let database = try await DatabaseKind.postgres.make(in: directory)
        let (emulator, account) = try await startEmulator()
        let key = try await LoadHarness.backendKey(database: database, in: directory)
        // slow- tokens take 2 s each at the emulator, so the victim is mid-send when killed. The
        // lease must outlast the slowest batch (256 claimed, 64 sent at a time: about 8 s), or
        // a live worker's claims would expire under it.
        let environment = fcmEnvironment(account: account, emulator: emulator, lease: "12")
        let victim = try await RunningHerald(arguments: ["--database", database], environment: environment, in: directory)
        let survivor = try await RunningHerald(arguments: ["--database", database], environment: environment, in: directory)
        let users = (0..<10).map { "lease-user-\($0)" }
        try await LoadHarness.registerUsers(users, tokenPrefix: "slow-", at: victim.url, key: key)

        let accepted = await LoadHarness.send(200, to: [victim.url], users: users, key: key)
        #expect(accepted.count == 200)
        // Kill one process once slow pushes are in flight (the emulator prints each before
        // answering it 2 s later).
        #expect(try await sendsInFlight(emulator), "slow pushes started")
        victim.process.signal(SIGKILL)
        _ = await victim.stop()

        let pushed = try await LoadHarness.waitForPushes(of: Set(accepted), emulator: emulator.url, timeout: .seconds(90))
        #expect(Set(accepted).subtracting(pushed).isEmpty, "\(Set(accepted).subtracting(pushed).count) notifications were never pushed")
        // The victim's leases ran out and the survivor claimed them again: a second attempt.
        // (The emulator logs a slow push before answering it, so outcomes land a little later.)
        var states: [String: (state: String, attempts: Int)] = [:]
        let deadline = ContinuousClock.now + .seconds(30)
        repeat {
            for id in accepted where states[id]?.state != "delivered" {
                let (_, status) = try await LoadHarness.request(.GET, "\(survivor.url)/api/notifications/\(id)", key: key)
                let push = (status["deliveries"] as? [[String: Any]] ?? []).first { $0["sink"] as? String == "fcm" }
                states[id] = (push?["state"] as? String ?? "missing", push?["attempts"] as? Int ?? 0)
            }
            if states.values.allSatisfy({ $0.state == "delivered" }) { break }
            try await Task.sleep(for: .milliseconds(250))
        } while ContinuousClock.now < deadline
        #expect(states.values.filter { $0.state != "delivered" }.isEmpty, "every push is recorded as delivered")
        let retaken = states.values.filter { $0.attempts >= 2 }.count
        #expect(retaken > 0, "some deliveries were taken over from the killed process")
        await survivor.expectCleanStop()
        _ = await emulator.stop()
    }
}

extension CrashTests {
    /// Waits (up to 10 s) until the emulator has begun answering a `slow-` token's push.
    func sendsInFlight(_ emulator: RunningHerald) async throws -> Bool {
        for _ in 0..<200 {
            if emulator.output.stdout.contains("to token slow-") { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Waits (up to 30 s) until every notification's push is recorded delivered.
    func recordedDelivered(_ ids: [String], at url: String, key: String) async throws -> Bool {
        var pending = Set(ids)
        let deadline = ContinuousClock.now + .seconds(30)
        while !pending.isEmpty && ContinuousClock.now < deadline {
            for id in pending {
                let (_, status) = try await LoadHarness.request(.GET, "\(url)/api/notifications/\(id)", key: key)
                let push = (status["deliveries"] as? [[String: Any]] ?? []).first { $0["sink"] as? String == "fcm" }
                if push?["state"] as? String == "delivered" { pending.remove(id) }
            }
            if !pending.isEmpty { try await Task.sleep(for: .milliseconds(100)) }
        }
        return pending.isEmpty
    }

    /// SIGTERM while slow pushes are in flight: the process exits within `shutdown_timeout`
    /// (plus the bounded cancellation), and a restart delivers everything accepted.
    @Test func sigtermUnderLoadExitsInBoundedTimeAndLosesNothing() async throws {
        let database = try await DatabaseKind.sqlite.make(in: directory)
        let (emulator, account) = try await startEmulator()
        let key = try await LoadHarness.backendKey(database: database, in: directory)
        var environment = fcmEnvironment(account: account, emulator: emulator, lease: "3")
        environment["HERALD_SHUTDOWN_TIMEOUT"] = "1"
        let server = try await RunningHerald(arguments: ["--database", database], environment: environment, in: directory)
        let users = (0..<10).map { "term-user-\($0)" }
        try await LoadHarness.registerUsers(users, tokenPrefix: "slow-", at: server.url, key: key)
        let accepted = await LoadHarness.send(300, to: [server.url], users: users, key: key)
        #expect(accepted.count == 300)
        #expect(try await sendsInFlight(emulator), "slow pushes started")

        let started = ContinuousClock.now
        let status = await server.stop()
        let took = ContinuousClock.now - started
        #expect(status == 0, "exit status \(status)")
        #expect(took < .seconds(8), "took \(took) to exit with shutdown_timeout 1 s")

        let restarted = try await RunningHerald(arguments: ["--database", database], environment: environment, in: directory)
        let pushed = try await LoadHarness.waitForPushes(of: Set(accepted), emulator: emulator.url, timeout: .seconds(60))
        #expect(Set(accepted).subtracting(pushed).isEmpty, "\(Set(accepted).subtracting(pushed).count) accepted notifications were never pushed")
        await restarted.expectCleanStop()
        _ = await emulator.stop()
    }
}

extension CrashTests {
    /// Runs `sql` (a Python string literal's content) on the SQLite file with Python's sqlite3,
    /// which every machine running the tests has; prints the last query's first row.
    func sqlite(_ path: String, _ script: String) async throws -> String {
        let program = """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1], timeout=30)
            result = None
            \(script)
            db.commit()
            print(result)
            """
        let run = try await runCommand("/usr/bin/env", ["python3", "-c", program, path], in: directory, timeout: .seconds(120))
        guard run.status == 0 else { throw HarnessError("python3 sqlite3 failed: \(run.stderr)") }
        return run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A fan-out above the inline limit killed with -9 halfway through its pages: the restarted
    /// process resumes from the committed cursor, and every subscriber gets one history row and
    /// one history delivery, none twice.
    @Test func killDashNineMidFanOutResumesFromTheCursorWithoutDuplicates() async throws {
        let database = try await DatabaseKind.sqlite.make(in: directory)
        let file = String(database.dropFirst("sqlite:".count))
        let admin = "hk_" + (0..<40).map { _ in String("0123456789abcdef".randomElement() ?? "0") }.joined()
        let environment = ["HERALD_BOOTSTRAP_ADMIN_KEY": admin, "HERALD_FANOUT_INLINE_LIMIT": "10"]
        let first = try await RunningHerald(arguments: ["--database", database], environment: environment, in: directory)
        let (_, channel) = try await LoadHarness.request(.POST, "\(first.url)/channel", key: admin, body: #"{"name":"Campus","desc":""}"#)
        let channelID = try #require(channel["_id"] as? String)
        let (_, area) = try await LoadHarness.request(.POST, "\(first.url)/area/\(channelID)", key: admin, body: #"{"name":"News","desc":""}"#)
        let areaID = try #require(area["id"] as? String)
        let (_, subject) = try await LoadHarness.request(
            .POST, "\(first.url)/subject/\(channelID)/\(areaID)", key: admin, body: #"{"name":"All","desc":"","opt":{"level":"","distribution":"Alert"}}"#)
        let topic = try #require(subject["topic_key"] as? String)
        let subscribers = 40_000
        _ = try await sqlite(
            file,
            """
            db.executemany("INSERT INTO users (id, updated_at) VALUES (?, 0)", ((f"fan-{i:06d}",) for i in range(\(subscribers))))
            db.executemany("INSERT INTO subscriptions (user_id, topic_key, created_at) VALUES (?, ?, 0)", ((f"fan-{i:06d}", "\(topic)") for i in range(\(subscribers))))
            """)

        let (status, posted) = try await LoadHarness.request(
            .POST, "\(first.url)/message", key: admin, body: #"{"title":"Drill","desc":"d","message":"m","topic_key":"\#(topic)","distribution":"Alert"}"#)
        #expect(status == 201)
        let id = try #require(posted["msi_key"] as? String)
        // Kill it once some pages, not all, are committed.
        var killedAt = -1
        for _ in 0..<2_000 {
            let (_, progress) = try await LoadHarness.request(.GET, "\(first.url)/api/notifications/\(id)", key: admin)
            let written = (progress["fan_out"] as? [String: Any])?["written"] as? Int ?? 0
            if written > 0 {
                first.process.signal(SIGKILL)
                killedAt = written
                break
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        _ = await first.stop()
        #expect(killedAt > 0 && killedAt < subscribers, "killed with \(killedAt) of \(subscribers) written")

        let second = try await RunningHerald(arguments: ["--database", database], environment: environment, in: directory)
        var state = ""
        let deadline = ContinuousClock.now + .seconds(120)
        while state != "done" && ContinuousClock.now < deadline {
            let (_, progress) = try await LoadHarness.request(.GET, "\(second.url)/api/notifications/\(id)", key: admin)
            let fanOut = progress["fan_out"] as? [String: Any]
            state = fanOut?["state"] as? String ?? ""
            if state == "done" {
                #expect(fanOut?["written"] as? Int == subscribers)
                #expect(fanOut?["recipients"] as? Int == subscribers)
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(state == "done", "the restarted process finished the fan-out")
        let counts = try await sqlite(
            file,
            """
            result = db.execute("SELECT (SELECT COUNT(*) FROM history WHERE notification_id = ?), (SELECT COUNT(DISTINCT user_id) FROM history WHERE notification_id = ?), (SELECT COUNT(*) FROM deliveries WHERE notification_id = ? AND sink = 'history')", ("\(id)",) * 3).fetchone()
            """)
        #expect(counts == "(\(subscribers), \(subscribers), \(subscribers))", "history rows, distinct users, history deliveries: \(counts)")
        await second.expectCleanStop()
    }
}

/// A value behind a lock that escaping, concurrent closures can share.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<T: Sendable>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}
