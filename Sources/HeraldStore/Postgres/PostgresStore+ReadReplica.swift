import Foundation
public import HeraldCore
import PostgresNIO

extension PostgresStore {
    /// Runs `body`, a read that tolerates a replica's lag, on the read replica while it is
    /// current (``PostgresReadReplica``), and on the primary otherwise. A read that fails on the
    /// replica runs again on the primary: the caller gets a current answer, never the replica's
    /// trouble. Only for reads: `body` may run twice.
    package func withReadConnection<Result: Sendable>(_ body: @escaping @Sendable (PostgresSession) async throws -> Result) async throws -> Result {
        guard let replica, replica.isUsable else { return try await withConnection(body) }
        let logger = self.logger
        do {
            return try await replica.pool.withConnection { connection in
                try await body(PostgresSession(connection: connection, preparation: replica.preparation, logger: logger))
            }
        } catch  where Self.isReplicaTrouble(error) {
            replica.readFailed(error)
            return try await withConnection(body)
        }
    }

    /// Whether a read failed for the replica's sake (no connection in time, a broken one, the
    /// server's own refusal, such as a query cancelled for a conflict with recovery) rather
    /// than the caller's: a row that does not decode fails on the primary too, and cancellation
    /// is the caller's.
    static func isReplicaTrouble(_ error: any Error) -> Bool {
        if error is PSQLError || PostgresPool.isConnectionFailure(error) { return true }
        return (error as? HeraldError)?.code == "storage_unavailable"
    }
}
