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

    /// Files with keys in them (`herald vapid generate --out`, the emulators' keys) are the
    /// owner's alone, an existing one tightened before the key goes in, and never written
    /// through a symbolic link planted at the path.
    @Test func keyFilesAreTheOwnersAloneAndNeverFollowALink() async throws {
        let herald = Binaries.path("herald")
        let fresh = directory.appendingPathComponent("vapid.txt").path
        let written = try await runCommand(herald, ["vapid", "generate", "--out", fresh], in: directory)
        #expect(written.status == 0, "\(written.stderr)")
        #expect(try Self.mode(fresh) == 0o600)
        #expect(try String(contentsOfFile: fresh, encoding: .utf8).contains("private_key: "))

        let open = directory.appendingPathComponent("open.txt").path
        #expect(
            FileManager.default.createFile(
                atPath: open, contents: Data("old and longer than a key pair ".utf8 + Data(count: 400)), attributes: [.posixPermissions: 0o644]))
        #expect(try await runCommand(herald, ["vapid", "generate", "--out", open], in: directory).status == 0)
        #expect(try Self.mode(open) == 0o600, "an existing file readable by others was tightened")
        #expect(try String(contentsOfFile: open, encoding: .utf8).hasPrefix("private_key: "), "and its old content replaced")

        let target = directory.appendingPathComponent("operators-file").path
        try "keep me".write(toFile: target, atomically: true, encoding: .utf8)
        let link = directory.appendingPathComponent("planted.p8").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        let refused = try await runCommand(herald, ["vapid", "generate", "--out", link], in: directory)
        #expect(refused.status != 0 && refused.stderr.contains("symbolic link"), "\(refused.stderr)")
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "keep me", "the link's target was overwritten")
    }
}
