import Foundation
import GRDB
import HeraldCore
import HeraldTestSupport
import Testing

@testable import HeraldStore

/// `holdsSchema()`: what the admin commands ask before they migrate, so that a database that is
/// not Herald's (empty, or another program's) is refused rather than filled with Herald's tables.
@Suite(.cleansUp) struct SchemaPresenceTests {
    func holdsItOnlyOnceMigrated(_ store: some HeraldStorage) async throws {
        #expect(try await store.holdsSchema() == false, "a new database")
        try await store.migrate()
        #expect(try await store.holdsSchema() == true, "once migrated")
    }

    @Test func sqliteFile() async throws {
        let path = try TestResources.temporaryDirectory("herald-schema").appendingPathComponent("new.sqlite").path
        let store = try SQLiteStore(path: path)
        TestResources.register { await store.close() }
        try await holdsItOnlyOnceMigrated(store)
        #expect(SQLiteStore.holdsSchema(atPath: path) == true)
    }

    @Test func sqliteInMemory() async throws {
        let store = try SQLiteStore(path: ":memory:")
        TestResources.register { await store.close() }
        try await holdsItOnlyOnceMigrated(store)
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func postgres() async throws {
        let store = try PostgresStore.patient(url: try await PostgresTestDatabase.create())
        TestResources.register { await store.close() }
        try await holdsItOnlyOnceMigrated(store)
    }

    /// The file is read without being opened for writing: another program's database keeps its
    /// bytes and its journal mode (a store's open would switch it to WAL).
    @Test func anotherProgramsFileIsOnlyRead() throws {
        let directory = try TestResources.temporaryDirectory("herald-schema")
        let foreign = directory.appendingPathComponent("app.db").path
        let queue = try DatabaseQueue(path: foreign)
        try queue.write { db in try db.execute(sql: "CREATE TABLE orders (id INTEGER); INSERT INTO orders VALUES (1)") }
        try queue.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: foreign))
        #expect(SQLiteStore.holdsSchema(atPath: foreign) == false)
        #expect(try Data(contentsOf: URL(fileURLWithPath: foreign)) == before)
        #expect(!FileManager.default.fileExists(atPath: foreign + "-wal"))

        let empty = directory.appendingPathComponent("empty.sqlite").path
        #expect(FileManager.default.createFile(atPath: empty, contents: Data()))
        #expect(SQLiteStore.holdsSchema(atPath: empty) == false)
        #expect(try Data(contentsOf: URL(fileURLWithPath: empty)).isEmpty)

        let text = directory.appendingPathComponent("notes.txt").path
        #expect(FileManager.default.createFile(atPath: text, contents: Data(String(repeating: "not a database\n", count: 20).utf8)))
        #expect(SQLiteStore.holdsSchema(atPath: text) == nil, "not a database: left to the open to explain")
        #expect(SQLiteStore.holdsSchema(atPath: directory.appendingPathComponent("missing.sqlite").path) == nil)
    }
}
