/// What `/metrics` and `/health/sinks` read of the queue: how many deliveries wait, and since
/// when each sink's oldest has waited (docs/performance.md, "The queue's gauges").
///
/// The oldest is found through `deliveries_pending_by_sink`, pending deliveries by sink and
/// notification id. Notification ids are made from the accept time's second (``ObjectID``), so
/// each sink's first entry is its oldest waiting delivery, to the second; its notification gives
/// the exact time. The sinks are stepped through the same index, one search each, so the read
/// costs a few searches whatever the backlog. The count still reads every pending delivery's
/// index entry (78 ms at a million on SQLite).
///
/// The same text runs on both engines: a recursive query is how each steps over an index's
/// distinct first column, since neither skips through an index for `GROUP BY` on its own.
package enum QueueStatsSQL {
    /// The index's name and definition, the same on both engines.
    static let index = (name: "deliveries_pending_by_sink", definition: "(sink, notification_id) WHERE state = 'pending'")

    /// The migration that makes the index on a database made before it.
    static let migration = ["CREATE INDEX IF NOT EXISTS \(index.name) ON deliveries \(index.definition)"]

    /// `pending_sinks`: each sink with a pending delivery, then a NULL row, found by one search
    /// of the index a sink (a claim's and the next due time's reads start from it too).
    package static let pendingSinks = """
        WITH RECURSIVE pending_sinks(sink) AS (
            SELECT MIN(sink) FROM deliveries WHERE state = 'pending'
            UNION ALL
            SELECT (SELECT MIN(d.sink) FROM deliveries d WHERE d.state = 'pending' AND d.sink > pending_sinks.sink)
            FROM pending_sinks WHERE pending_sinks.sink IS NOT NULL
        )
        """

    /// The sinks with a pending delivery, by name: the sinks a claim reads.
    package static let sinksWithPending =
        pendingSinks + """

            SELECT sink FROM pending_sinks WHERE sink IS NOT NULL
            """

    /// ``pendingSinks``, and `oldest_pending`: each sink's oldest accept time (NULL when the
    /// notification is gone).
    private static let oldestBySinkCTE =
        pendingSinks + """
            ,
            oldest_pending(sink, oldest) AS (
                SELECT pending_sinks.sink, (
                    SELECT n.timestamp FROM notifications n
                    WHERE n.id = (SELECT MIN(d.notification_id) FROM deliveries d WHERE d.state = 'pending' AND d.sink = pending_sinks.sink)
                )
                FROM pending_sinks WHERE pending_sinks.sink IS NOT NULL
            )
            """

    /// One row: `pending`, the count, and `oldest`, the oldest accept time of any.
    package static let queueStats =
        oldestBySinkCTE + """

            SELECT (SELECT COUNT(*) FROM deliveries WHERE state = 'pending') AS pending, (SELECT MIN(oldest) FROM oldest_pending) AS oldest
            """

    /// A row per sink with a pending delivery: `sink` and `oldest`.
    package static let oldestBySink =
        oldestBySinkCTE + """

            SELECT sink, oldest FROM oldest_pending
            """
}
