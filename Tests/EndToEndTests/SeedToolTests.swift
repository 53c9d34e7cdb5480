import Foundation
import HeraldTestSupport
import NIOHTTP1
import Testing

/// `herald-bench seed` (docs/performance.md, "A seeded year"): the rows it writes in bulk are
/// read through the API as if Herald had written them, on both engines: each heavy user's
/// history pages newest first without gaps, and the inbox counts equal a tally of the items.
@Suite(.cleansUp) struct SeedToolTests {
    static let admin = "hk_" + String(repeating: "y", count: 40)
    static var engines: [String] { ["sqlite"] + (PostgresTestDatabase.serverURL == nil ? [] : ["postgres"]) }

    @Test(arguments: engines)
    func aSeededYearReadsAsHeraldWroteIt(_ engine: String) async throws {
        let directory = try TestResources.temporaryDirectory("herald-seed")
        let database =
            engine == "sqlite" ? "sqlite:" + directory.appendingPathComponent("year.sqlite").path : try await PostgresTestDatabase.create()
        // 6 000 rows, 5 recipients each: 1 200 notifications, so each of the 100 heavy users has 12.
        let seed = ["seed", "--database", database, "--users", "300", "--history", "6000", "--days", "30"]
        let seeded = try await runCommand(Binaries.path("herald-bench"), seed, in: directory, timeout: .seconds(180))
        #expect(seeded.status == 0, "\(seeded.stderr)")
        #expect(seeded.stderr.contains("history: 6000 of 6000 rows"), "progress is shown: \(seeded.stderr)")
        #expect(seeded.stderr.contains("deliveries: 12000 of 12000 rows"), "\(seeded.stderr)")
        if engine == "postgres" {
            // Every index the seed dropped to fill its tables is built again, valid, on every
            // month of history too.
            try await PostgresTestDatabase.execute(
                "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_index WHERE NOT indisvalid) THEN RAISE EXCEPTION 'an invalid index'; END IF; END $$", on: database)
        }

        // A second seed into the same database is refused before it writes anything.
        let again = try await runCommand(Binaries.path("herald-bench"), seed, in: directory, timeout: .seconds(60))
        #expect(again.status != 0 && again.stderr.contains("holds a seed already"), "\(again.stderr)")

        let herald = try await RunningHerald(
            arguments: ["--database", database], environment: ["HERALD_BOOTSTRAP_ADMIN_KEY": Self.admin], in: directory)
        for user in ["seed-user-0", "seed-user-57", "seed-user-250"] {
            var items: [[String: Any]] = []
            var cursor = ""
            repeat {
                let (status, page) = try await LoadHarness.request(
                    .GET, "\(herald.url)/api/notifications/history?limit=5&state=all&before=\(cursor)", key: Self.admin, user: user)
                #expect(status == 200)
                items += (page["history"] as? [[String: Any]]) ?? []
                cursor = page["next"] as? String ?? ""
            } while !cursor.isEmpty && items.count < 1_000
            let ids = items.compactMap { ($0["data"] as? [String: Any])?["id"] as? String }
            #expect(Set(ids).count == ids.count, "no item twice")
            #expect(ids == ids.sorted(by: >), "newest first (the ids carry their second)")
            #expect(ids.count == (user == "seed-user-250" ? 24 : 12), "\(user): \(ids.count) items")
            let inbox = items.filter { ($0["archived"] as? Bool) == false }
            let (_, counts) = try await LoadHarness.request(.GET, "\(herald.url)/api/inbox/counts", key: Self.admin, user: user)
            #expect(counts["unread"] as? Int == inbox.filter { ($0["read"] as? Bool) == false }.count, "\(user): \(counts)")
            #expect(counts["unseen"] as? Int == inbox.filter { ($0["seen"] as? Bool) == false }.count, "\(user): \(counts)")
            #expect(counts["archived"] as? Int == items.count - inbox.count, "\(user): \(counts)")
        }
        await herald.expectCleanStop()
    }

    @Test func badSizesAreRefusedNamingTheOption() async throws {
        let directory = try TestResources.temporaryDirectory("herald-seed")
        let database = "sqlite:" + directory.appendingPathComponent("never.sqlite").path
        for (arguments, named) in [
            (["--users", "10"], "--users"), (["--history", "-1"], "--history"), (["--recipients", "0"], "--recipients"), (["--days", "0"], "--days"),
            (["--unpartitioned"], "--unpartitioned"),
        ] {
            let result = try await runCommand(Binaries.path("herald-bench"), ["seed", "--database", database] + arguments, in: directory)
            #expect(result.status == 64 && result.stderr.contains(named), "\(arguments): \(result.status) \(result.stderr)")
        }
        let unknown = try await runCommand(Binaries.path("herald-bench"), ["seed", "--database", "mysql://x"], in: directory)
        #expect(unknown.status == 64 && unknown.stderr.contains("--database"), "\(unknown.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("never.sqlite").path), "nothing written")
        // The benchmark that seeds through it refuses bad sizes the same way, before it starts anything.
        for (arguments, named) in [
            (["--users", "10"], "--users"), (["--history", "-1"], "--history"), (["--seconds", "0"], "--seconds"), (["--concurrency", "0"], "--concurrency"),
            (["--postgres-seeded", "postgres://herald@127.0.0.1:1/x"], "--postgres"),
        ] {
            let result = try await runCommand(Binaries.path("herald-bench"), ["year"] + arguments, in: directory)
            #expect(result.status == 64 && result.stderr.contains(named), "year \(arguments): \(result.status) \(result.stderr)")
        }
    }
}
