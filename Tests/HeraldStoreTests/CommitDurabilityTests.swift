import GRDB
import HeraldTestSupport
import PostgresNIO
import Testing

@testable import HeraldStore

/// A 2xx means committed to disk, whatever the storage's defaults say: SQLite's writer syncs
/// the WAL at every commit, and PostgreSQL answers COMMIT only once its WAL is flushed.
@Suite(.cleansUp) struct CommitDurabilityTests {
    /// GRDB sets `synchronous = NORMAL` when it opens a pool in WAL mode.
    @Test func theSQLiteWriterSyncsEveryCommit() async throws {
        let store = try #require(try await StoreKind.sqlite.make() as? SQLiteStore)
        let (journal, synchronous) = try await store.writer.writeWithoutTransaction { db in
            (try String.fetchOne(db, sql: "PRAGMA journal_mode"), try Int.fetchOne(db, sql: "PRAGMA synchronous"))
        }
        #expect(journal == "wal")
        #expect(synchronous == 2, "PRAGMA synchronous is \(synchronous.map(String.init) ?? "unknown"), not FULL (2)")
    }

    /// An operator's database (or server, or role) set to `synchronous_commit = off` would
    /// acknowledge commits a PostgreSQL crash can still lose.
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func postgreSQLSessionsCommitSynchronouslyWhateverTheDatabaseDefault() async throws {
        let url = try await PostgresTestDatabase.create()
        let setup = try PostgresStore(url: url)
        let database = try PostgresStore.configuration(url: url).database ?? ""
        try await setup.withConnection { session in
            try await session.execute(PostgresQuery(unsafeSQL: "ALTER DATABASE \"\(database)\" SET synchronous_commit = off"))
        }
        await setup.close()

        let store = try PostgresStore(url: url)
        let setting = try await store.transaction { session in
            try await session.row(PostgresQuery(unsafeSQL: "SHOW synchronous_commit")).map { try $0[0].decode(String.self) }
        }
        await store.close()
        #expect(setting == "on")
    }
}
