import GRDB
import HeraldCore
import HeraldTestSupport
import PostgresNIO
import Testing

@testable import HeraldStore

/// A 2xx means committed to disk, whatever the storage's defaults say: SQLite's writer syncs
/// the WAL at every commit, and Herald does not run on a PostgreSQL that answers COMMIT before
/// its WAL is flushed.
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
    /// acknowledge commits a PostgreSQL crash can still lose: Herald refuses to start on it,
    /// saying why, rather than answer 202s it cannot keep.
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func postgreSQLWithAsynchronousCommitsIsRefusedAtStartup() async throws {
        let url = try await PostgresTestDatabase.create()
        // The stores that only set the database up get a first connection's worth of patience
        // under the full suite's load (migrate() has its own; withConnection does not).
        let setup = try PostgresStore(url: url, acquireTimeout: .seconds(30))
        try await setup.migrate()
        let database = try PostgresStore.configuration(url: url).database ?? ""
        try await setup.withConnection { session in
            try await session.execute(PostgresQuery(unsafeSQL: "ALTER DATABASE \"\(database)\" SET synchronous_commit = off"))
        }
        await setup.close()

        let store = try PostgresStore(url: url)
        let error = await #expect(throws: HeraldError.self) { try await store.migrate() } as HeraldError?
        await store.close()
        #expect(error?.code == "storage_unsafe")
        #expect(error?.message.contains("synchronous_commit = off") == true, "\(error?.message ?? "")")

        // `local` still waits for the flush on this server: accepted.
        let fixed = try PostgresStore(url: url, acquireTimeout: .seconds(30))
        try await fixed.withConnection { session in
            try await session.execute(PostgresQuery(unsafeSQL: "ALTER DATABASE \"\(database)\" SET synchronous_commit = local"))
        }
        await fixed.close()
        let local = try PostgresStore(url: url)
        try await local.migrate()
        await local.close()
    }
}
