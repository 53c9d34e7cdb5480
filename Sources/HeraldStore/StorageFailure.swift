import GRDB
public import HeraldCore

/// Storage errors that mean "not now" rather than "this request is wrong": the HTTP layer
/// answers them 503 with Retry-After, never 500.
public enum StorageFailure {
    /// The 503 for `error`, or nil when it is not a storage availability problem.
    public static func unavailable(_ error: any Error) -> HeraldError? {
        if let error = error as? DatabaseError {
            switch error.resultCode {
            case .SQLITE_BUSY, .SQLITE_LOCKED:
                return HeraldError(.unavailable, code: "storage_busy", "the database is locked by another process; retry shortly")
            case .SQLITE_CANTOPEN, .SQLITE_IOERR, .SQLITE_FULL, .SQLITE_READONLY, .SQLITE_NOTADB, .SQLITE_CORRUPT:
                return HeraldError(.unavailable, code: "storage_unavailable", "the database cannot be written now (\(error.resultCode))")
            default:
                return nil
            }
        }
        if PostgresPool.isConnectionFailure(error) {
            return HeraldError(.unavailable, code: "storage_unavailable", "the database is unreachable; retry shortly")
        }
        switch PostgresPool.transientFailure(error) {
        case .busy(let state):
            return HeraldError(.unavailable, code: "storage_busy", "the database could not finish the request now (SQLSTATE \(state)); retry shortly")
        case .exhausted(let state):
            return HeraldError(.unavailable, code: "storage_unavailable", "the database is short of resources (SQLSTATE \(state)); retry shortly")
        case nil:
            break
        }
        return nil
    }
}
