/// Leased deliveries a transaction failed (a device removed or registered by another user, a
/// user erased), as `NOTIFY` payloads on ``PostgresStore/withdrawalChannel``: their ids in
/// decimal, comma-separated. A process that handed one of them to its own workers at accept
/// sends it without reading the row again, so it must hear that the row failed; the process
/// that failed it withdraws its copies itself, but another process's hand-off knows only this.
enum WithdrawalMessage {
    /// Ids per payload: 300 of at most 20 bytes stays under PostgreSQL's 8 000-byte limit.
    static let idsPerPayload = 300

    /// A `WITH` clause entry named `withdrawn` that notifies, from inside PostgreSQL, the ids of
    /// the rows of `failed` (an earlier entry of the same `WITH` that returns `id` and `leased`)
    /// that were leased: a pending row no process holds needs no notice. Select
    /// `COUNT(*) FROM withdrawn` in the statement, or PostgreSQL skips it.
    static func notices(of failed: String) -> String {
        """
        withdrawn AS (
            SELECT pg_notify('\(PostgresStore.withdrawalChannel)', string_agg(id::text, ',' ORDER BY id))
            FROM (SELECT id, (row_number() OVER (ORDER BY id) - 1) / \(idsPerPayload) AS chunk FROM \(failed) WHERE leased = 1) AS chunked
            GROUP BY chunk
        )
        """
    }

    /// The ids of a payload; what does not read as one (a newer process's payload) is skipped.
    static func ids(_ payload: String) -> [Int64] {
        payload.split(separator: ",").compactMap { Int64($0) }
    }
}
