import PostgresNIO
import Testing

@testable import HeraldCards

/// The cards' prepared statement, held to what ``PostgresPreparedStatementTests`` holds the
/// store's to: one text whatever the input (a prepared statement is kept by name, and another
/// text would run with this one's binds), and a name PostgreSQL keeps whole.
@Suite struct CardStatePreparedStatementTests {
    @Test func theCardStateStatementHasOneTextWhateverTheUser() {
        let built = PostgresCardStore.CardStateStatement(userID: "someone-else").query.sql
        #expect(!PostgresCardStore.CardStateStatement.sql.isEmpty)
        #expect(built == PostgresCardStore.CardStateStatement.sql)
        #expect(PostgresCardStore.CardStateStatement.name.utf8.count < 64)
    }
}
