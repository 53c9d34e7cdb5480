import Foundation
import HeraldCore

/// Delivery ids on PostgreSQL are made from time: the second they were drawn times 2^21 plus a
/// sequence's value modulo 2^21. They still grow as deliveries are written, so claims and
/// records, which find deliveries by id, reach a single month's partition; and they stay below
/// 2^53 (until 2106), so a JSON reader that holds numbers as doubles reads them exactly.
/// Two ids collide only if 2^21 (2 097 152) are drawn in one second; the key refuses the second.
package enum DeliveryIDs {
    package static let sequenceBits = 21
    static let sequence = "delivery_ids"
    /// The next id, as SQL.
    static let next = "(floor(extract(epoch FROM clock_timestamp()))::bigint * \(1 << sequenceBits) + nextval('\(sequence)') % \(1 << sequenceBits))"
}

extension MonthPartitionedTable {
    /// Deliveries, by the month of their id (``DeliveryIDs``). A month goes once every delivery
    /// in it is final (delivered, failed, dead, or folded into a digest already released) and
    /// was last changed before retention's cutoff; until then its finished rows are deleted in
    /// batches, as retention that depends on a row's state is.
    package static let deliveries = MonthPartitionedTable(
        table: "deliveries", key: "id", keyKind: .shiftedSecond,
        parent: { _ in
            """
            CREATE TABLE deliveries (
                id BIGINT NOT NULL DEFAULT \(DeliveryIDs.next),
                notification_id TEXT NOT NULL,
                sink TEXT NOT NULL,
                user_id TEXT NOT NULL,
                device_id TEXT,
                topic_key TEXT,
                distribution TEXT NOT NULL,
                state TEXT NOT NULL,
                attempts BIGINT NOT NULL DEFAULT 0,
                last_error TEXT,
                next_attempt_at BIGINT,
                updated_at BIGINT NOT NULL,
                leased SMALLINT NOT NULL DEFAULT 0,
                fold TEXT,
                PRIMARY KEY (id)
            ) PARTITION BY RANGE (id)
            """
        },
        indexes: DueDeliveriesSQL.indexes(columns: DueDeliveriesSQL.postgresColumns) + [
            ("deliveries_by_notification", "(notification_id)"),
            ("deliveries_pending_by_device", "(device_id) WHERE state = 'pending'"),
            ("deliveries_finished_by_age", "(updated_at) WHERE state <> 'pending'"),
            ("deliveries_held", "(id) WHERE state = 'held'"),
            QueueStatsSQL.index,
        ],
        partitionIndexes: [],
        constraintIndexes: ["deliveries_pkey"],
        identity: nil,
        // Owned by the parent, the sequence is what an older Herald still running beside this one
        // finds as the column's (`pg_get_serial_sequence`), and it outlives the old table, which
        // owned it before the conversion and is dropped once its rows expire.
        beforeCreate: [],
        afterCreate: ["ALTER SEQUENCE \(DeliveryIDs.sequence) OWNED BY deliveries.id"],
        legacyTriggers: [],
        dropRule: DropRule(
            newest: "updated_at", newestFilter: "WHERE state <> 'pending'",
            // Each through its own index: a pending or held delivery, or one folded into a
            // digest not yet released (``FoldingSQL/finishedDelivery``, read from the digest's side).
            keptQuery: """
                SELECT EXISTS (SELECT 1 FROM $partition WHERE state = 'pending')
                    OR EXISTS (SELECT 1 FROM $partition WHERE state = 'held')
                    OR EXISTS (SELECT 1 FROM digest_items i JOIN $partition d ON d.notification_id = i.notification_id AND d.user_id = i.user_id
                        WHERE d.state = 'folded') AS kept
                """,
            counted: nil)
    )

    /// Migration v23: delivery ids from time from now on, on either layout; an empty table (a
    /// new database's) is partitioned, one with rows waits for `herald migrate --partition-deliveries`.
    /// There the identity gives way to the sequence, continued past the identity's last id and
    /// owned by the column: an older Herald still running beside this one (a rolling upgrade)
    /// draws its ids from it, small and unique, where it drew them from the identity.
    static let deliveriesMigration: [String] = [
        "CREATE SEQUENCE IF NOT EXISTS \(DeliveryIDs.sequence)",
        deliveries.migration(otherwise: [
            "ALTER TABLE deliveries ALTER COLUMN id DROP IDENTITY",
            "PERFORM setval('\(DeliveryIDs.sequence)', COALESCE((SELECT max(id) FROM deliveries), 0) + 1, false)",
            "ALTER SEQUENCE \(DeliveryIDs.sequence) OWNED BY deliveries.id",
            "ALTER TABLE deliveries ALTER COLUMN id SET DEFAULT \(DeliveryIDs.next)",
        ]),
    ]
}
