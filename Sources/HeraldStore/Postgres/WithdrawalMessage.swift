import HeraldCore

/// Leased deliveries a transaction failed (a device removed or registered by another user, a
/// user erased), as `NOTIFY` payloads on ``PostgresStore/workChannel``: `w`, then their ids in
/// decimal, comma-separated. A process that handed one of them to its own workers at accept
/// sends it without reading the row again, so it must hear that the row failed; the process
/// that failed it withdraws its copies itself, but another process's hand-off knows only this.
/// On the work channel, whose listening connection every process holds anyway: an empty
/// payload there is new work.
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
            SELECT pg_notify('\(PostgresStore.workChannel)', 'w' || string_agg(id::text, ',' ORDER BY id))
            FROM (SELECT id, (row_number() OVER (ORDER BY id) - 1) / \(idsPerPayload) AS chunk FROM \(failed) WHERE leased = 1) AS chunked
            GROUP BY chunk
        )
        """
    }

    /// What a payload on the work channel says. One this version cannot read (a newer
    /// process's) is taken for new work: a wake too many costs one claim.
    static func notice(_ payload: String) -> WorkNotice {
        guard payload.hasPrefix("w") else { return .work }
        return .withdrawn(payload.dropFirst().split(separator: ",").compactMap { Int64($0) })
    }
}
