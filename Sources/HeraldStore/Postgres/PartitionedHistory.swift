import Foundation
import HeraldCore

extension MonthPartitionedTable {
    /// History, by the month of its notification's id: ids begin with their second, so a range
    /// of ids is a range of time, and the unique notification-and-user pair holds the key. `seq`
    /// stays an identity; its primary key is a plain index (`history_by_seq`). A month's rows
    /// that the inbox counters count are deleted, through the triggers, before it is dropped.
    package static let history = MonthPartitionedTable(
        table: "history", key: "notification_id", keyKind: .hexSecondPrefix,
        parent: { identityStart in
            """
            CREATE TABLE history (
                seq BIGINT GENERATED ALWAYS AS IDENTITY (START WITH \(identityStart)),
                notification_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                read BIGINT NOT NULL DEFAULT 0,
                created_at BIGINT NOT NULL,
                seen BIGINT NOT NULL DEFAULT 0,
                archived BIGINT NOT NULL DEFAULT 0,
                snoozed_until BIGINT,
                type TEXT NOT NULL DEFAULT '',
                UNIQUE (notification_id, user_id)
            ) PARTITION BY RANGE (notification_id)
            """
        },
        // The unpartitioned table's indexes by name, plus one on `seq` alone, which the key was:
        // purges and snooze wakes find rows by it.
        indexes: [
            ("history_by_user", "(user_id, seq)"),
            ("history_by_age", "(created_at)"),
            ("history_unread", "(user_id, seq) WHERE read = 0"),
            ("history_archived", "(user_id, seq) WHERE archived = 1"),
            ("history_snoozed", "(snoozed_until) WHERE snoozed_until IS NOT NULL"),
            ("history_read_by_age", "(created_at) WHERE read = 1"),
            ("history_archived_by_age", "(created_at) WHERE archived = 1"),
            ("history_by_seq", "(seq)"),
        ],
        partitionIndexes: [],
        constraintIndexes: ["history_pkey", "history_notification_id_user_id_key"],
        identity: "seq",
        beforeCreate: [],
        afterCreate: InboxSQL.postgresTriggerStatements,
        legacyTriggers: ["inbox_counts_inserted", "inbox_counts_deleted", "inbox_counts_changed"],
        dropRule: DropRule(
            newest: "created_at", newestFilter: "", keptQuery: nil, counted: (filters: InboxSQL.countedRows, order: "user_id, seq", rowID: "seq"))
    )
}
