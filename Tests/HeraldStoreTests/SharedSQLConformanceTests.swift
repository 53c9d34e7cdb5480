import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

/// What feature modules run their SQL through (``SharedSQLDatabase``): the same statement text,
/// values and answers on every engine.
@Suite(.cleansUp) struct SharedSQLConformanceTests {
    @Test(arguments: StoreKind.allCases)
    func placeholdersValuesAndNullsRoundTrip(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        // `$2` first, `$1` twice: each engine binds by number.
        let rows = try await store.rows(
            SharedStatement(
                "SELECT $1 AS a, $2 AS b, $1 || '-' || $3 AS c, $4 AS d", .text("x' OR 1=1 --"), .integer(Int64.min), .text("é🙂"), .text(nil)))
        let row = try #require(rows.first)
        #expect(try row.text("a") == "x' OR 1=1 --")
        #expect(try row.integer("b") == Int64.min)
        #expect(try row.text("c") == "x' OR 1=1 ---é🙂")
        #expect(try row.optionalText("d") == nil)
        #expect(throws: HeraldError.self) { try row.text("missing") }
        await store.close()
    }

    /// A transaction's statements commit together or not at all, and its answer is the last
    /// statement's rows.
    @Test(arguments: StoreKind.allCases)
    func aTransactionIsAllOrNothing(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let read = SharedStatement("SELECT items FROM content_sets WHERE name = $1", .text("pending"))
        let rows = try await store.transaction([
            SharedStatement("UPDATE content_sets SET items = $1 WHERE name = 'pending'", .text("[1]")), read,
        ])
        #expect(try rows.map { try $0.text("items") } == ["[1]"])
        await #expect(throws: (any Error).self) {
            _ = try await store.transaction([
                SharedStatement("UPDATE content_sets SET items = $1 WHERE name = 'pending'", .text("[2]")),
                SharedStatement("UPDATE no_such_table SET x = 1"),
            ])
        }
        #expect(try await store.rows(read).map { try $0.text("items") } == ["[1]"], "the failed transaction changed nothing")
        await store.close()
    }

    /// Several reads answer in order from one snapshot (PostgreSQL's REPEATABLE READ: at its
    /// default, each statement would read a newer one), and `insertionOrder` orders a table's
    /// rows as they were inserted, whatever their keys.
    @Test(arguments: StoreKind.allCases)
    func snapshotReadsAndInsertionOrder(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        for (id, name) in [("b", "first"), ("a", "second"), ("c", "third")] {
            _ = try await store.transaction([
                SharedStatement("INSERT INTO channels (id, name, description, access) VALUES ($1, $2, '', '[]')", .text(id), .text(name))
            ])
        }
        var reads = [
            SharedStatement("SELECT name FROM channels ORDER BY \(store.insertionOrder)"),
            SharedStatement("SELECT COUNT(*) AS n FROM channels"),
        ]
        // SQLite reads in one snapshot whatever the statements; PostgreSQL must be told.
        if kind == .postgres { reads.append(SharedStatement("SELECT current_setting('transaction_isolation') AS level")) }
        let answers = try await store.rows(of: reads)
        #expect(answers.count == reads.count)
        #expect(try answers.first?.map { try $0.text("name") } == ["first", "second", "third"])
        #expect(try answers.dropFirst().first?.first?.integer("n") == 3)
        if kind == .postgres { #expect(try answers.last?.first?.text("level") == "repeatable read") }
        await store.close()
    }
}
