import Logging
import PostgresNIO
import Synchronization

/// A statement Herald runs for every group commit or delivery batch, or for a read apps poll
/// (the cards' 304, history pages), prepared once per pooled connection (postgres-nio keeps it
/// there by ``name``). PostgreSQL then parses and analyses it once per connection rather than on
/// every execution, and plans it once when it settles on a generic plan; under the accept load
/// that work was about a fifth of the server's CPU, and a read that names every history month
/// took longer to plan than to run.
///
/// The text is written with the same interpolation as any other query, and ``sql`` is the text
/// built for a sample input: every input must give the same text (values travel as binds,
/// never `unescaped:`), which ``PostgresSession/rows(_:)-(PreparedQuery)`` checks. It lists the
/// columns it returns rather than `*`: PostgreSQL refuses to run a prepared statement whose
/// result columns a migration by another process changed, until the connection closes.
package protocol PreparedQuery: PostgresPreparedStatement where Row == PostgresRow {
    /// The statement for one input.
    var query: PostgresQuery { get }
}

extension PreparedQuery {
    package func makeBindings() -> PostgresBindings { query.binds }

    package func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}

/// Whether a store's ``PreparedQuery``s are prepared, or sent unnamed like any other query.
///
/// A prepared statement that fails can keep failing on its connection: postgres-nio answers
/// every later use of a name whose preparation failed (a lock or statement timeout, say) with
/// that error for as long as the connection lives, and PostgreSQL refuses a prepared statement
/// whose result columns a migration changed. So the first failure that is not a lost connection,
/// nor a refusal of the statement's values or rows (``isExecutionFailure(_:)``), turns preparing
/// off for the store's life: slower, never stuck.
final class StatementPreparation: Sendable {
    private let enabled = Atomic(true)

    var isEnabled: Bool { enabled.load(ordering: .relaxed) }

    /// Whether `error` can only come from running a statement, never from preparing it: data
    /// (22), integrity (23) and transaction rollback (40: deadlocks, serialization failures)
    /// errors arise from a statement's values and rows, after PostgreSQL has parsed and
    /// described it. A deadlock or a refused value says nothing of the prepared statement, and
    /// turning preparing off for the process on one would cost every later batch its speed.
    static func isExecutionFailure(_ error: any Error) -> Bool {
        guard let state = (error as? PSQLError)?.serverInfo?[.sqlState] else { return false }
        return ["22", "23", "40"].contains(String(state.prefix(2)))
    }

    func disable(after error: any Error, in statement: String, logger: Logger) {
        guard enabled.exchange(false, ordering: .relaxed) else { return }
        logger.warning(
            "a prepared statement failed; statements are no longer prepared in this process",
            metadata: ["statement": "\(statement)", "error": "\(PostgresStore.describe(error))"])
    }
}

extension PostgresSession {
    /// Runs `statement`, prepared on this connection the first time it runs here.
    package func rows<Statement: PreparedQuery>(_ statement: Statement) async throws -> [PostgresRandomAccessRow] {
        guard preparation.isEnabled else { return try await rows(statement.query) }
        // Another text under the same name would run the prepared one with these binds.
        guard statement.query.sql == Statement.sql else {
            assertionFailure("the text of \(Statement.name) depends on its input")
            return try await rows(statement.query)
        }
        do {
            var rows: [PostgresRandomAccessRow] = []
            for try await row in try await connection.execute(statement, logger: logger) { rows.append(row.makeRandomAccess()) }
            return rows
        } catch {
            if !PostgresPool.isConnectionFailure(error) && !StatementPreparation.isExecutionFailure(error) {
                preparation.disable(after: error, in: Statement.name, logger: logger)
            }
            throw error
        }
    }

    package func row<Statement: PreparedQuery>(_ statement: Statement) async throws -> PostgresRandomAccessRow? {
        try await rows(statement).first
    }
}
