import PostgresNIO

/// A statement Herald runs for every group commit or delivery batch, prepared once per pooled
/// connection (postgres-nio keeps it there by ``name``). PostgreSQL then parses and analyses it
/// once per connection rather than on every execution, and plans it once when it settles on a
/// generic plan; under the accept load that work was about a fifth of the server's CPU.
///
/// The text is written with the same interpolation as any other query, and ``sql`` is the text
/// built for a sample input: every input must give the same text (values travel as binds,
/// never `unescaped:`), which ``PostgresSession/rows(_:)-(PreparedQuery)`` checks. It lists the
/// columns it returns rather than `*`: PostgreSQL refuses to run a prepared statement whose
/// result columns a migration by another process changed, until the connection closes.
protocol PreparedQuery: PostgresPreparedStatement where Row == PostgresRow {
    /// The statement for one input.
    var query: PostgresQuery { get }
}

extension PreparedQuery {
    func makeBindings() -> PostgresBindings { query.binds }

    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}

extension PostgresSession {
    /// Runs `statement`, prepared on this connection the first time it runs here.
    func rows<Statement: PreparedQuery>(_ statement: Statement) async throws -> [PostgresRandomAccessRow] {
        // Another text under the same name would run the prepared one with these binds.
        guard statement.query.sql == Statement.sql else {
            assertionFailure("the text of \(Statement.name) depends on its input")
            return try await rows(statement.query)
        }
        var rows: [PostgresRandomAccessRow] = []
        for try await row in try await connection.execute(statement, logger: logger) { rows.append(row.makeRandomAccess()) }
        return rows
    }

    func row<Statement: PreparedQuery>(_ statement: Statement) async throws -> PostgresRandomAccessRow? {
        try await rows(statement).first
    }
}
