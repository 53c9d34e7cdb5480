import Foundation
public import HeraldCore

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
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            replica.readFailed(error)
            return try await withConnection(body)
        }
    }

    /// Whether reads that tolerate lag go to the read replica now.
    public var readsFromReplica: Bool { replica?.isUsable ?? false }
}
