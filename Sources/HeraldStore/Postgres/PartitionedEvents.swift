import Foundation
import HeraldCore

extension MonthPartitionedTable {
    /// Engagement events, by the month they were received (`received_at`, what their retention
    /// counts from), so a month goes whole once it is past `retention.events`. An event id is
    /// unique per user: each month has its own unique index on the pair, and the writer looks
    /// in the other months first (``PostgresCardStore``'s `storeEvents`, one user at a time
    /// under an advisory lock). `seq` keeps its sequence, which the partitioned table owns.
    package static let events = MonthPartitionedTable(
        table: "events", key: "received_at", keyKind: .micros,
        parent: { _ in
            """
            CREATE TABLE events (
                seq BIGINT NOT NULL DEFAULT nextval('events_seq_seq'),
                user_id TEXT NOT NULL,
                event_id TEXT NOT NULL,
                type TEXT NOT NULL,
                reaction TEXT,
                card TEXT,
                name TEXT,
                properties TEXT NOT NULL,
                at BIGINT NOT NULL,
                received_at BIGINT NOT NULL
            ) PARTITION BY RANGE (received_at)
            """
        },
        // The unpartitioned table's, plus one on `seq` alone, which its key was: purges find rows by it.
        indexes: [
            ("events_by_card", "(card, type) WHERE card IS NOT NULL"),
            ("events_by_age", "(received_at)"),
            ("events_by_seq", "(seq)"),
        ],
        partitionIndexes: [("user_event", "(user_id, event_id)")],
        constraintIndexes: ["events_pkey", "events_user_id_event_id_key"],
        identity: nil,
        // A new database's table took its sequence with it when it was dropped.
        beforeCreate: ["CREATE SEQUENCE IF NOT EXISTS events_seq_seq"],
        // Owned by the parent, the sequence outlives the old table, which owned it before the
        // conversion and is dropped once its rows expire.
        afterCreate: ["ALTER SEQUENCE events_seq_seq OWNED BY events.seq"],
        legacyTriggers: [],
        dropRule: DropRule(newest: "received_at", newestFilter: "", keptQuery: nil, counted: nil)
    )

    /// The advisory lock class under which events are stored one user at a time.
    package static let eventUserLock: Int32 = 62_004
}
