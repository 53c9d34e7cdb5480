/// What `herald sinks` counts: the deliveries waiting now, and those that reached another state
/// in a recent window, each read through an index (docs/performance.md, "What `herald sinks`
/// reads"). Counting every delivery the retention keeps took 47 s over 100 M rows on
/// PostgreSQL; this costs the backlog and the window's traffic, however long deliveries are kept.
///
/// The same text runs on both engines (`$1`, `$2`: SQLite numbers them by first appearance).
package enum SinkCountersSQL {
    /// A row per sink and waiting state: `sink`, `state` (`pending`, `held`) and `n`, through
    /// `deliveries_pending_by_sink` and `deliveries_held`.
    static let waiting = """
        SELECT sink, 'pending' AS state, COUNT(*) AS n FROM deliveries WHERE state = 'pending' GROUP BY sink
        UNION ALL
        SELECT sink, 'held' AS state, COUNT(*) AS n FROM deliveries WHERE state = 'held' GROUP BY sink
        """

    /// A row per sink and state reached since `$1` (microseconds) by a delivery that no longer
    /// waits, through `deliveries_finished_by_age`, whose condition (`state <> 'pending'`) the
    /// text repeats word for word so that SQLite sees the index applies.
    static let finishedSince = """
        SELECT sink, state, COUNT(*) AS n FROM deliveries
        WHERE state <> 'pending' AND updated_at >= $1 AND state <> 'held'
        GROUP BY sink, state
        """

    /// The latest error of sink `$1`: of a delivery still retrying (through
    /// `deliveries_pending_by_sink`), or of one that finished since `$2`.
    static let lastError = """
        SELECT last_error FROM (
            SELECT last_error, updated_at, id FROM deliveries WHERE state = 'pending' AND sink = $1 AND last_error IS NOT NULL
            UNION ALL
            SELECT last_error, updated_at, id FROM deliveries
            WHERE state <> 'pending' AND updated_at >= $2 AND sink = $1 AND last_error IS NOT NULL
        ) errors
        ORDER BY updated_at DESC, id DESC LIMIT 1
        """
}
