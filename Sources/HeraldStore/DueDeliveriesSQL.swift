/// The indexes a claim reads due deliveries through, the same on both engines: first attempts
/// and retries apart, each by sink (docs/durability.md, "A provider that fails part of the time").
///
/// A claim reads the two kinds separately, so that neither starves the other (``RetryShare``).
/// Through one index of every pending delivery, each read walked the other kind's due rows
/// to find its own: with a million first attempts due and no retry, the retries' read looked
/// at a million rows and found none, in every claim, while holding SQLite's writer. Apart,
/// each read stops at its limit or at the first row not yet due.
///
/// By sink, because a claim leaves out the sinks whose circuits are open: in due order alone,
/// it walked an open circuit's whole backlog (every delivery of it is due, and older than the
/// others') to reach the first delivery of another sink, in every claim of the outage. A
/// claim reads each sink it takes on its own, up to its limit, and keeps the earliest of
/// all: the same deliveries as one read in due order, at a few index searches a sink.
enum DueDeliveriesSQL {
    /// What picks a first attempt, and a retry (or a lease run out): a read names it as written
    /// here, so the engine can use the kind's partial index.
    static let firstAttempt = "attempts = 0"
    static let retry = "attempts > 0"
    /// Each kind's index and condition.
    static let kinds: [(index: String, condition: String)] = [("deliveries_first_due", firstAttempt), ("deliveries_retry_due", retry)]

    /// The definitions, for a table's index list: `columns` are the sink, then due order
    /// (``sqliteColumns``, ``postgresColumns``).
    static func indexes(columns: String) -> [(name: String, definition: String)] {
        kinds.map { ($0.index, "\(columns) WHERE state = 'pending' AND \($0.condition)") }
    }

    /// The columns on SQLite, whose rowid is the id and comes last in every index.
    static let sqliteColumns = "(sink, next_attempt_at)"
    /// The columns on PostgreSQL, where the id is a column like any other.
    static let postgresColumns = "(sink, next_attempt_at, id)"

    /// The migration from the index of every pending delivery. A database made since has the
    /// two already (PostgreSQL's partitioned deliveries are made from the current index list).
    static func migration(columns: String) -> [String] {
        indexes(columns: columns).map { "CREATE INDEX IF NOT EXISTS \($0.name) ON deliveries \($0.definition)" }
            + ["DROP INDEX IF EXISTS deliveries_due"]
    }

    /// The migration from the two indexes in due order alone to the two by sink: each is made
    /// again (a database that ran ``migration(columns:)`` since this build has them by sink already,
    /// and pays for one more build of two partial indexes on an empty or young table).
    static func bySinkMigration(columns: String) -> [String] {
        kinds.map { "DROP INDEX IF EXISTS \($0.index)" } + migration(columns: columns)
    }

    /// One sink's due deliveries of a kind (`condition`), earliest first: `id` and
    /// `next_attempt_at`. Arguments: the sink, now, the limit.
    static func dueOfSink(_ condition: String) -> String {
        "SELECT id, next_attempt_at FROM deliveries WHERE state = 'pending' AND \(condition) AND sink = ? AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?"
    }

    /// The ids of one user's deliveries not yet done (waiting for an attempt, held for a count,
    /// or folded into a digest not yet released), each kind read through its own index, so an
    /// erasure looks at the queue and not at every delivery ever stored. `user` is the user id's
    /// placeholder (`?3`, `$1`).
    static func unfinished(user: String) -> String {
        kinds.map { "SELECT id FROM deliveries WHERE state = 'pending' AND \($0.condition) AND user_id = \(user)" }.joined(separator: " UNION ALL ")
            + " UNION ALL SELECT id FROM deliveries WHERE state = 'held' AND user_id = \(user)"
            + " UNION ALL SELECT d.id FROM digest_items i JOIN deliveries d ON d.notification_id = i.notification_id AND d.user_id = i.user_id"
            + " WHERE i.user_id = \(user) AND d.state = 'folded'"
    }

    /// When the next delivery falls due: the earliest of each sink's first of each kind, each
    /// read through its kind's index (one search per sink and kind). `filter` is the condition
    /// on `pending_sinks.sink` (` AND …`), written once per kind.
    static func nextDue(filter: String) -> String {
        let reads = kinds.map {
            "SELECT (SELECT MIN(next_attempt_at) FROM deliveries WHERE state = 'pending' AND \($0.condition) AND sink = pending_sinks.sink) AS due"
                + " FROM pending_sinks WHERE pending_sinks.sink IS NOT NULL\(filter)"
        }
        return QueueStatsSQL.pendingSinks + "\nSELECT MIN(due) AS due FROM (\(reads.joined(separator: " UNION ALL "))) kinds"
    }
}
