import GRDB
import HeraldTestSupport
import Testing

@testable import HeraldStore

/// A 2xx means committed to disk: on SQLite the writer's commits sync the WAL
/// (`synchronous = FULL`), whatever GRDB sets when it opens the pool in WAL mode.
@Suite(.cleansUp) struct SQLiteDurabilityTests {
    @Test func theWriterSyncsEveryCommit() async throws {
        let store = try #require(try await StoreKind.sqlite.make() as? SQLiteStore)
        let (journal, synchronous) = try await store.writer.writeWithoutTransaction { db in
            (try String.fetchOne(db, sql: "PRAGMA journal_mode"), try Int.fetchOne(db, sql: "PRAGMA synchronous"))
        }
        #expect(journal == "wal")
        #expect(synchronous == 2, "PRAGMA synchronous is \(synchronous.map(String.init) ?? "unknown"), not FULL (2)")
    }
}
