import Foundation
import HeraldTestSupport
import NIOHTTP1
import Synchronization
import Testing

/// `herald migrate --partition-history` and `--partition-deliveries` on a seeded database from
/// before partitions, with Herald serving it throughout (docs/durability.md, "Month partitions
/// on PostgreSQL"): a conversion killed with SIGKILL while it waits for a lock (of history, of
/// deliveries) leaves Herald accepting; the next run carries it on; every history page, inbox
/// count and notification's deliveries reads the same before, half way and after.
@Suite(.cleansUp) struct HistoryPartitioningTests {
    static let admin = "hk_" + String(repeating: "p", count: 40)
    static let users = ["seed-user-0", "seed-user-57", "seed-user-250"]

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aKilledConversionCarriesOnAndHistoryReadsTheSame() async throws {
        let directory = try TestResources.temporaryDirectory("herald-partitions")
        let database = try await PostgresTestDatabase.create()
        let seed = ["seed", "--database", database, "--users", "300", "--history", "6000", "--days", "120", "--unpartitioned"]
        let seeded = try await runCommand(Binaries.path("herald-bench"), seed, in: directory, timeout: .seconds(180))
        #expect(seeded.status == 0, "\(seeded.stderr)")

        let herald = try await RunningHerald(
            arguments: ["--database", database], environment: ["HERALD_BOOTSTRAP_ADMIN_KEY": Self.admin], in: directory)
        defer { herald.terminate() }
        let before = try await Self.views(of: herald)

        // A long read holds history: the conversion waits for its lock, and is killed waiting.
        try await Self.killWhileWaitingForLock(on: "history", converting: ["--partition-history"], database: database, in: directory)
        // As a run killed after its first step leaves it: history's ids bounded below the first
        // of a month, checked yet, the scan not (the next run validates it and carries on).
        let bound = String(format: "%08x", Int(Self.firstOfTheMonth(after: Date().addingTimeInterval(40 * 86_400)).timeIntervalSince1970))
        try await PostgresTestDatabase.execute(
            "ALTER TABLE history ADD CONSTRAINT history_legacy_bound CHECK (notification_id < '\(bound)') NOT VALID", on: database)

        // Half done, Herald still takes notifications (their ids lie below the bound).
        let (status, accepted) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: Self.admin, body: #"{"type":"comment","title":"during","user_ids":["seed-user-0"]}"#)
        #expect(status == 202, "\(accepted)")
        let during = try #require(accepted["id"] as? String)
        #expect(try await Self.waitForHistory(of: herald, toShow: during), "the notification accepted half way is in history")
        let halfway = try await Self.views(of: herald)
        var expected = before
        expected["seed-user-0"]?.ids.insert(during, at: 0)
        expected["seed-user-0"]?.unread += 1
        #expect(halfway == expected, "every page and count as before, with the new notification on top")

        let again = try await runCommand(
            Binaries.path("herald"), ["migrate", "--partition-history", "--database", database], in: directory, timeout: .seconds(120))
        #expect(again.status == 0, "\(again.stdout)\(again.stderr)")
        #expect(again.stdout.contains("carrying on: the keys of history are bounded below '\(bound)'"), "the bound is kept: \(again.stdout)")
        #expect(again.stdout.contains("history is partitioned by month"), "\(again.stdout)")
        #expect(try await Self.views(of: herald) == halfway, "history pages and inbox counts read the same once partitioned")

        let (afterStatus, _) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: Self.admin, body: #"{"type":"comment","title":"after","user_ids":["seed-user-57"]}"#)
        #expect(afterStatus == 202)
        await herald.expectCleanStop()
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func deliveriesArePartitionedWhileHeraldAcceptsAndReadTheSame() async throws {
        let directory = try TestResources.temporaryDirectory("herald-partitions")
        let database = try await PostgresTestDatabase.create()
        let seed = ["seed", "--database", database, "--users", "300", "--history", "3000", "--days", "90", "--unpartitioned"]
        let seeded = try await runCommand(Binaries.path("herald-bench"), seed, in: directory, timeout: .seconds(180))
        #expect(seeded.status == 0, "\(seeded.stderr)")
        // Retention would delete the seeded deliveries (a week old and more) while the test reads them.
        let herald = try await RunningHerald(
            arguments: ["--database", database], environment: ["HERALD_BOOTSTRAP_ADMIN_KEY": Self.admin, "HERALD_RETENTION_DELIVERIES": "3650d"],
            in: directory)
        defer { herald.terminate() }
        let seededIDs = try #require(try await Self.views(of: herald)["seed-user-57"]?.ids.prefix(5)).map { $0 }
        #expect(seededIDs.count == 5)
        let before = try await Self.deliveries(of: seededIDs, on: herald)

        // Killed while it waits for its lock (a long read holds deliveries), it leaves Herald
        // accepting.
        try await Self.killWhileWaitingForLock(
            on: "deliveries", converting: ["--partition-deliveries", "--partition-events"], database: database, in: directory)
        // As a run killed after its first step leaves it: ids bounded below the first of a
        // month, checked for new rows only. New deliveries' ids, made from time, lie below it.
        let bound = Int64(Self.firstOfTheMonth(after: Date().addingTimeInterval(40 * 86_400)).timeIntervalSince1970) << 21
        try await PostgresTestDatabase.execute(
            "ALTER TABLE deliveries ADD CONSTRAINT deliveries_legacy_bound CHECK (id < \(bound)) NOT VALID", on: database)
        let (halfwayStatus, halfway) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: Self.admin, body: #"{"type":"comment","title":"halfway","user_ids":["seed-user-57"]}"#)
        #expect(halfwayStatus == 202, "\(halfway)")
        let halfwayID = try #require(halfway["id"] as? String)
        #expect(try await Self.waitForHistory(of: herald, toShow: halfwayID, user: "seed-user-57"), "the notification accepted half way is delivered")

        // Run again, it carries on; accepts go on while it converts: every one is taken.
        let stop = Mutex(false)
        let accepting = Task {
            var accepted: [String] = []
            while !stop.withLock({ $0 }) {
                let (status, body) = try await LoadHarness.request(
                    .POST, "\(herald.url)/api/notifications", key: Self.admin, body: #"{"type":"comment","title":"during","user_ids":["seed-user-57"]}"#)
                #expect(status == 202, "\(body)")
                if let id = body["id"] as? String { accepted.append(id) }
            }
            return accepted
        }
        let converted = try await runCommand(
            Binaries.path("herald"), ["migrate", "--partition-deliveries", "--partition-events", "--database", database], in: directory,
            timeout: .seconds(120))
        stop.withLock { $0 = true }
        let during = try await accepting.value
        #expect(converted.status == 0, "\(converted.stdout)\(converted.stderr)")
        #expect(converted.stdout.contains("carrying on: the keys of deliveries are bounded below \(bound)"), "\(converted.stdout)")
        #expect(converted.stdout.contains("deliveries is partitioned by month"), "\(converted.stdout)")
        #expect(converted.stdout.contains("events is partitioned by month"), "\(converted.stdout)")
        #expect(!during.isEmpty)

        let partitioned = try await Self.deliveries(of: seededIDs, on: herald)
        #expect(try await Self.deliveries(of: [halfwayID], on: herald)[halfwayID]?.isEmpty == false, "the half way notification's deliveries kept")
        #expect(partitioned == before, "the seeded deliveries read the same once partitioned: \(Self.compact(before)) \(Self.compact(partitioned))")
        let (status, accepted) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: Self.admin, body: #"{"type":"comment","title":"after","user_ids":["seed-user-57"]}"#)
        #expect(status == 202)
        let after = try #require(accepted["id"] as? String)
        #expect(try await Self.waitForHistory(of: herald, toShow: after, user: "seed-user-57"), "the notification accepted after is delivered")
        for id in during.suffix(3) + [after] {
            let deliveries = try #require(try await Self.deliveries(of: [id], on: herald)[id])
            #expect(!deliveries.isEmpty && deliveries.allSatisfy { $0.id > 1 << 50 }, "stored with ids made from time: \(deliveries)")
        }
        let again = try await runCommand(
            Binaries.path("herald"), ["migrate", "--partition-deliveries", "--database", database], in: directory, timeout: .seconds(60))
        #expect(again.stdout.contains("deliveries is already partitioned"), "\(again.stdout)")
        await herald.expectCleanStop()
    }

    @Test func sqliteIsToldThePartitionsAreForPostgreSQL() async throws {
        let directory = try TestResources.temporaryDirectory("herald-partitions")
        let database = "sqlite:" + directory.appendingPathComponent("herald.sqlite").path
        for flag in ["--partition-history", "--partition-deliveries", "--partition-events"] {
            let result = try await runCommand(Binaries.path("herald"), ["migrate", flag, "--database", database], in: directory, timeout: .seconds(60))
            #expect(result.status == 1 && result.stderr.contains("\(flag) is for PostgreSQL"), "\(result.status) \(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("herald.sqlite").path), "nothing created")
        }
    }

    struct StoredDelivery: Equatable {
        var id: Int64
        var sink: String
        var state: String
    }

    /// Runs `herald migrate` with `flags` while a long read holds `table`, and kills it with
    /// SIGKILL once it says it waits for the lock.
    static func killWhileWaitingForLock(on table: String, converting flags: [String], database: String, in directory: URL) async throws {
        let reader = try await PostgresLockHolder.start(url: database, running: "LOCK TABLE \(table) IN ACCESS SHARE MODE")
        let output = try OutputCollector()
        let converting = makeProcess(
            Binaries.path("herald"), ["migrate"] + flags + ["--database", database], environment: [:], in: directory, collecting: output)
        try converting.run()
        defer { converting.terminate() }
        for _ in 0..<600 where !output.stdout.contains("waiting for the lock on \(table)") && converting.isRunning {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(output.stdout.contains("waiting for the lock on \(table)"), "\(output.stdout)\(output.stderr)")
        converting.signal(SIGKILL)
        _ = await converting.waitForExit()
        await reader.rollBack()
    }

    static func compact(_ found: [String: [StoredDelivery]]) -> String {
        found.sorted { $0.key < $1.key }.map { "\($0.key): " + $0.value.map { "\($0.id)/\($0.sink)/\($0.state)" }.joined(separator: ",") }.joined(
            separator: "\n")
    }

    /// Each notification's deliveries as `GET /api/notifications/{id}` lists them.
    static func deliveries(of ids: [String], on herald: RunningHerald) async throws -> [String: [StoredDelivery]] {
        var found: [String: [StoredDelivery]] = [:]
        for id in ids {
            let (status, body) = try await LoadHarness.request(.GET, "\(herald.url)/api/notifications/\(id)", key: admin)
            #expect(status == 200, "\(id): \(body)")
            found[id] = ((body["deliveries"] as? [[String: Any]]) ?? []).map {
                StoredDelivery(id: ($0["id"] as? NSNumber)?.int64Value ?? -1, sink: $0["sink"] as? String ?? "", state: $0["state"] as? String ?? "")
            }
        }
        return found
    }

    static func firstOfTheMonth(after date: Date) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? .current
        let month = calendar.date(from: calendar.dateComponents([.year, .month], from: date)) ?? date
        return calendar.date(byAdding: .month, value: 1, to: month) ?? date
    }

    struct View: Equatable {
        var ids: [String]
        var unread: Int
    }

    /// Each user's whole history, newest first, and unread count.
    static func views(of herald: RunningHerald) async throws -> [String: View] {
        var views: [String: View] = [:]
        for user in users {
            var ids: [String] = []
            var cursor = ""
            repeat {
                let (status, page) = try await LoadHarness.request(
                    .GET, "\(herald.url)/api/notifications/history?limit=7&state=all&before=\(cursor)", key: admin, user: user)
                #expect(status == 200)
                ids += ((page["history"] as? [[String: Any]]) ?? []).compactMap { ($0["data"] as? [String: Any])?["id"] as? String }
                cursor = page["next"] as? String ?? ""
            } while !cursor.isEmpty && ids.count < 1_000
            let (_, counts) = try await LoadHarness.request(.GET, "\(herald.url)/api/inbox/counts", key: admin, user: user)
            views[user] = View(ids: ids, unread: counts["unread"] as? Int ?? -1)
        }
        return views
    }

    static func waitForHistory(of herald: RunningHerald, toShow id: String, user: String = "seed-user-0") async throws -> Bool {
        for _ in 0..<100 {
            let (_, page) = try await LoadHarness.request(.GET, "\(herald.url)/api/notifications/history?limit=5", key: admin, user: user)
            if ((page["history"] as? [[String: Any]]) ?? []).contains(where: { ($0["data"] as? [String: Any])?["id"] as? String == id }) { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return false
    }
}
