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
}
