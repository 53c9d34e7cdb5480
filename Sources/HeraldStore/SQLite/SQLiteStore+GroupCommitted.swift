import GRDB
import HeraldCore

/// One short write waiting for a group commit, its result's type erased so that writes of every
/// kind share a transaction.
struct AppWrite: Sendable {
    let run: @Sendable (Database) throws -> any Sendable
}

extension SQLiteStore {
    /// Runs `body` in the next group commit of app writes: one transaction, and one fsync, for
    /// every such write that arrived while the previous one committed. `body` may run twice, in
    /// its batch's transaction and then alone when another write of that batch failed, so it
    /// must only touch the database.
    func groupCommitted<Result: Sendable>(_ body: @escaping @Sendable (Database) throws -> Result) async throws -> Result {
        let answer = try await appWrites.submit(AppWrite { db in try body(db) })
        guard let result = answer as? Result else {
            throw HeraldError(.internal, code: "storage_error", "a group-committed write answered \(type(of: answer)), not \(Result.self)")
        }
        return result
    }
}
