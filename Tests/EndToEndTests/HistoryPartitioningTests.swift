import Foundation
import HeraldTestSupport
import NIOHTTP1
import Synchronization
import Testing

/// `herald migrate --partition-history` on a seeded database from before partitions, with
/// Herald serving it throughout (docs/durability.md, "History partitions on PostgreSQL"): a
/// conversion killed with SIGKILL while it waits for a lock leaves Herald accepting; one left
/// after its first step is carried on by the next run; every history page and inbox count
/// reads the same before, half way and after.
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
        let reader = try await PostgresLockHolder.start(url: database, running: "LOCK TABLE history IN ACCESS SHARE MODE")
        let output = try OutputCollector()
        let converting = makeProcess(
            Binaries.path("herald"), ["migrate", "--partition-history", "--database", database], environment: [:], in: directory, collecting: output)
        try converting.run()
        defer { converting.terminate() }
        for _ in 0..<600 where !output.stdout.contains("waiting for history's lock") && converting.isRunning {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(output.stdout.contains("waiting for history's lock"), "\(output.stdout)\(output.stderr)")
        converting.signal(SIGKILL)
        _ = await converting.waitForExit()
        await reader.rollBack()
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
        #expect(again.stdout.contains("carrying on: history's keys are bounded below '\(bound)'"), "the bound is kept: \(again.stdout)")
        #expect(again.stdout.contains("history is partitioned by month"), "\(again.stdout)")
        #expect(try await Self.views(of: herald) == halfway, "history pages and inbox counts read the same once partitioned")

        let (afterStatus, _) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: Self.admin, body: #"{"type":"comment","title":"after","user_ids":["seed-user-57"]}"#)
        #expect(afterStatus == 202)
        await herald.expectCleanStop()
    }

    @Test func sqliteIsToldThePartitionsAreForPostgreSQL() async throws {
        let directory = try TestResources.temporaryDirectory("herald-partitions")
        let database = "sqlite:" + directory.appendingPathComponent("herald.sqlite").path
        let result = try await runCommand(
            Binaries.path("herald"), ["migrate", "--partition-history", "--database", database], in: directory, timeout: .seconds(60))
        #expect(result.status == 1 && result.stderr.contains("--partition-history is for PostgreSQL"), "\(result.status) \(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("herald.sqlite").path), "nothing created")
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

    static func waitForHistory(of herald: RunningHerald, toShow id: String) async throws -> Bool {
        for _ in 0..<100 {
            let (_, page) = try await LoadHarness.request(.GET, "\(herald.url)/api/notifications/history?limit=5", key: admin, user: "seed-user-0")
            if ((page["history"] as? [[String: Any]]) ?? []).contains(where: { ($0["data"] as? [String: Any])?["id"] as? String == id }) { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return false
    }
}
