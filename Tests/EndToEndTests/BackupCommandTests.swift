import Foundation
import HeraldTestSupport
import NIOHTTP1
import Testing

/// `herald backup` beside a running server, and a server started on the copy: the operator's
/// whole backup and restore, as README describes it.
@Suite(.cleansUp) struct BackupCommandTests {
    let directory: URL

    init() throws {
        directory = try TestResources.temporaryDirectory("herald-backup-cli")
    }

    @Test func aRunningServersDatabaseIsBackedUpAndRestored() async throws {
        let database = "sqlite:" + directory.appendingPathComponent("herald.sqlite").path
        let herald = try await RunningHerald(arguments: ["--database", database], in: directory)
        let key = try await LoadHarness.backendKey(database: database, in: directory)
        for index in 1...3 {
            let (status, _) = try await LoadHarness.request(
                .POST, "\(herald.url)/api/notifications", key: key, body: "{\"type\":\"comment\",\"title\":\"before \(index)\",\"user_ids\":[\"ana\"]}")
            #expect(status == 202)
        }
        let copy = directory.appendingPathComponent("copy.sqlite").path
        let backup = try await runCommand(Binaries.path("herald"), ["backup", "--database", database, copy], in: directory)
        #expect(backup.status == 0, "\(backup.stderr)")
        #expect(backup.stdout.contains("backed up") && backup.stdout.contains("quick_check ok"), "\(backup.stdout)")
        let again = try await runCommand(Binaries.path("herald"), ["backup", "--database", database, copy], in: directory)
        #expect(again.status == 1 && again.stderr.contains("already exists"), "\(again.stderr)")
        let (after, _) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: key, body: "{\"type\":\"comment\",\"title\":\"after\",\"user_ids\":[\"ana\"]}")
        #expect(after == 202)
        await herald.expectCleanStop()

        // Restored: a server on the copy has what was committed before the backup, and not after.
        let restored = try await RunningHerald(arguments: ["--database", "sqlite:" + copy], in: directory)
        let (status, history) = try await LoadHarness.request(.GET, "\(restored.url)/api/notifications/history", key: key, user: "ana")
        #expect(status == 200)
        let titles = ((history["history"] as? [[String: Any]]) ?? []).compactMap { ($0["notification"] as? [String: Any])?["title"] as? String }
        #expect(titles.sorted() == ["before 1", "before 2", "before 3"], "\(status) \(history)")
        await restored.expectCleanStop()
    }

    @Test func postgreSQLIsPointedToPgDumpWithoutItsPassword() async throws {
        let result = try await runCommand(
            Binaries.path("herald"), ["backup", "--database", "postgres://herald:s3cret@127.0.0.1:5432/herald", "x.sqlite"], in: directory)
        #expect(result.status == 1)
        #expect(result.stderr.contains("pg_dump") && !result.stderr.contains("s3cret"), "\(result.stderr)")
    }
}
