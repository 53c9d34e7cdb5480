import Foundation
import GRDB
import HeraldCore
import HeraldTestSupport
import Synchronization
import Testing

@testable import HeraldStore

/// `herald backup`: a copy of a database in use holds one consistent snapshot, is readable by
/// Herald, and never replaces a file or leaves a partial one.
@Suite(.cleansUp) struct SQLiteBackupTests {
    let directory: URL
    let ids = ObjectIDGenerator()

    init() throws {
        directory = try TestResources.temporaryDirectory("herald-backup")
    }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    @Test func aDatabaseBeingWrittenIsCopiedConsistently() async throws {
        let store = try SQLiteStore(path: path("live.sqlite"))
        TestResources.register { await store.close() }
        try await store.migrate()
        for index in 0..<200 {
            _ = try await store.registerDevice(userID: "before", registration: .token("token-\(index)", provider: "fcm"), newID: ids.next(), at: Date())
        }
        // The server goes on writing while the copy is made; the writes are not held up.
        let writing = Task {
            var written = 0
            while !Task.isCancelled {
                _ = try await store.registerDevice(userID: "during", registration: .token("during-\(written)", provider: "fcm"), newID: ids.next(), at: Date())
                written += 1
            }
            return written
        }
        let reported = Mutex<[(Int64, Int64)]>([])
        let summary = try await SQLiteBackup.copy(from: path("live.sqlite"), to: path("copy.sqlite"), interval: .milliseconds(1)) { written, total in
            reported.withLock { $0.append((written, total)) }
        }
        writing.cancel()
        _ = try? await writing.value
        #expect(summary.bytes == (try FileManager.default.attributesOfItem(atPath: path("copy.sqlite"))[.size] as? NSNumber)?.int64Value)
        #expect(reported.withLock { $0 }.allSatisfy { $0.0 >= 0 && $0.1 == summary.sourceBytes })
        let permissions = try FileManager.default.attributesOfItem(atPath: path("copy.sqlite"))[.posixPermissions] as? NSNumber
        #expect(permissions?.intValue == 0o600, "the copy holds device tokens and key hashes")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".partial") }.isEmpty)

        // Herald opens the copy, and it holds every write committed before it began.
        let copy = try SQLiteStore(path: path("copy.sqlite"))
        TestResources.register { await copy.close() }
        try await copy.migrate()
        let live = try await store.devices(userID: "before").map(\.id)
        #expect(live.count == 200)
        #expect(try await copy.devices(userID: "before").map(\.id) == live)
    }

    /// A server that crashed leaves its last commits in the -wal file. The copy holds them, and
    /// the source stays as it was: a read-write connection closing last would have checkpointed
    /// the -wal into the file and deleted it.
    @Test func theSourceIsOnlyRead() async throws {
        let live = try DatabasePool(path: path("live.sqlite"))
        try await live.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_autocheckpoint = 0") }
        try SQLiteSchema.migrator.migrate(live)
        try await live.write { db in
            try db.execute(sql: "CREATE TABLE t (x TEXT NOT NULL)")
            try db.execute(sql: "INSERT INTO t (x) VALUES ('in the wal')")
        }
        // The files as a crash leaves them: the commit is in the -wal, no process has them open.
        for suffix in ["", "-wal"] {
            try FileManager.default.copyItem(atPath: path("live.sqlite") + suffix, toPath: path("crashed.sqlite") + suffix)
        }
        try live.close()
        let before = try ["", "-wal"].map { try Data(contentsOf: URL(fileURLWithPath: path("crashed.sqlite") + $0)) }
        #expect(before[1].count > 0)

        _ = try await SQLiteBackup.copy(from: path("crashed.sqlite"), to: path("copy.sqlite"))

        let after = try ["", "-wal"].map { try Data(contentsOf: URL(fileURLWithPath: path("crashed.sqlite") + $0)) }
        #expect(after == before, "the source's file and its -wal are as they were")
        let copy = try DatabaseQueue(path: path("copy.sqlite"))
        defer { try? copy.close() }
        #expect(try await copy.read { db in try String.fetchAll(db, sql: "SELECT x FROM t") } == ["in the wal"])
    }

    @Test func aMissingSourceOrAnExistingDestinationIsRefusedAndNothingIsWritten() async throws {
        await #expect(throws: HeraldError.self) { _ = try await SQLiteBackup.copy(from: path("absent.sqlite"), to: path("out.sqlite")) }
        #expect(!FileManager.default.fileExists(atPath: path("absent.sqlite")), "no empty database is made where the source was named")
        #expect(!FileManager.default.fileExists(atPath: path("out.sqlite")))

        let store = try SQLiteStore(path: path("live.sqlite"))
        TestResources.register { await store.close() }
        try await store.migrate()
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: path("taken.sqlite")))
        let refused = await #expect(throws: HeraldError.self) { _ = try await SQLiteBackup.copy(from: path("live.sqlite"), to: path("taken.sqlite")) }
        #expect(refused?.message.contains("already exists") == true)
        #expect(try String(contentsOfFile: path("taken.sqlite"), encoding: .utf8) == "keep me")

        // A file that is not a database is named, not copied.
        try Data("not a database".utf8).write(to: URL(fileURLWithPath: path("text.sqlite")))
        await #expect(throws: HeraldError.self) { _ = try await SQLiteBackup.copy(from: path("text.sqlite"), to: path("out.sqlite")) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".partial") || $0 == "out.sqlite" }.isEmpty)

        // Nor is an empty file or another program's database: the copy would restore nothing.
        #expect(FileManager.default.createFile(atPath: path("empty.sqlite"), contents: Data()))
        let foreign = try DatabaseQueue(path: path("app.db"))
        try await foreign.write { db in try db.execute(sql: "CREATE TABLE orders (id INTEGER)") }
        try foreign.close()
        for source in ["empty.sqlite", "app.db"] {
            let notHeralds = await #expect(throws: HeraldError.self) { _ = try await SQLiteBackup.copy(from: path(source), to: path("out.sqlite")) }
            #expect(
                notHeralds?.message
                    == "'\(path(source))' holds no Herald tables: it is empty or another program's (database, HERALD_DATABASE, --database); nothing was copied")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".partial") || $0 == "out.sqlite" }.isEmpty)
    }
}
