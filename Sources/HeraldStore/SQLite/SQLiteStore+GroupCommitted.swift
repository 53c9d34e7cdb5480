import GRDB
import HeraldCore

/// One short write waiting for a group commit, its result's type erased so that writes of every
/// kind share a transaction.
struct AppWrite: Sendable {
    let run: @Sendable (Database) throws -> any Sendable
}

extension SQLiteStore {
    /// Runs `body` in the next group commit of app writes: one transaction, and one fsync, for
    /// every such write that arrived while the previous one committed.
    ///
    /// `body` runs inside a savepoint of its own. When it throws a ``HeraldError`` (a refusal of
    /// the request's input, such as an unknown card or a bad setting), its changes are rolled
    /// back to that savepoint and the error answers this request alone: thrown out of the
    /// batch, it would fail the batch, which then runs again one write per transaction, so a
    /// client sending refused requests would cost every other writer the group commit. Any
    /// other error (the database's own) still fails the batch, so `body` may run twice, in its
    /// batch's transaction and then alone; it must only touch the database.
    package func groupCommitted<Value: Sendable>(_ body: @escaping @Sendable (Database) throws -> Value) async throws -> Value {
        let answer = try await appWrites.submit(
            AppWrite { db in
                var outcome: Result<Value, HeraldError>?
                try db.inSavepoint {
                    do {
                        outcome = .success(try body(db))
                        return .commit
                    } catch let refusal as HeraldError {
                        outcome = .failure(refusal)
                        return .rollback
                    }
                }
                return outcome
            })
        guard let outcome = answer as? Result<Value, HeraldError>? else {
            throw HeraldError(.internal, code: "storage_error", "a group-committed write answered \(type(of: answer)), not \(Value.self)")
        }
        guard let outcome else { throw HeraldError(.internal, code: "storage_error", "a group-committed write answered nothing") }
        return try outcome.get()
    }
}
