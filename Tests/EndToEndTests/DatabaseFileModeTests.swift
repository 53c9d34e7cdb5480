import Foundation
import HeraldTestSupport
import NIOHTTP1
import Testing

/// The SQLite database holds device tokens, users' ids and their history: one Herald creates
/// is readable by its owner only (it was 0644 under the usual umask, readable by every account
/// on the machine, where `herald backup`'s copy was 0600), and one that others may read is
/// warned about at start, its mode left as its operator set it.
@Suite(.cleansUp) struct DatabaseFileModeTests {
    let directory: URL

    init() throws {
        directory = try TestResources.temporaryDirectory("herald-file-mode")
    }

    static func mode(_ path: String) throws -> Int {
        try #require((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue)
    }

    @Test func aNewDatabaseIsTheOwnersAloneAndAnOpenOneIsWarnedAbout() async throws {
        let file = directory.appendingPathComponent("herald.sqlite").path
        let database = "sqlite:" + file
        let herald = try await RunningHerald(arguments: ["--database", database], in: directory)
        let key = try await LoadHarness.backendKey(database: database, in: directory)
        let (status, _) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: key, body: "{\"type\":\"comment\",\"title\":\"t\",\"user_ids\":[\"ana\"]}")
        #expect(status == 202)
        for path in [file, file + "-wal", file + "-shm"] {
            #expect(try Self.mode(path) == 0o600, "\(path)")
        }
        #expect(!(herald.output.stdout + herald.output.stderr).contains("may be read by other accounts"))
        await herald.expectCleanStop()

        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file)
        let open = try await RunningHerald(arguments: ["--database", database], in: directory)
        let output = open.output.stdout + open.output.stderr
        #expect(output.contains("may be read by other accounts on this machine (mode 644)"), "\(output)")
        #expect(try Self.mode(file) == 0o644, "the operator's mode is kept")
        await open.expectCleanStop()
    }
}
