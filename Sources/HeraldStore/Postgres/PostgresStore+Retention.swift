import Foundation
import HeraldCore
import PostgresNIO

extension PostgresStore {
    /// Whole months go first, dropped once every delivery in them is final and past `before`;
    /// then one batch of finished deliveries past it from what is left.
    public func purgeFinishedDeliveries(before: Date, limit: Int) async throws -> Int {
        let dropped = try await dropExpiredPartitions(of: .deliveries, before: before)
        return try await dropped
            + purge(
                """
                DELETE FROM deliveries WHERE id IN (
                    SELECT id FROM deliveries WHERE \(unescaped: FoldingSQL.finishedDelivery) AND updated_at < \(Self.micros(before)) LIMIT \(limit)
                ) RETURNING 1
                """
            )
    }

    public func purgeIdempotencyKeys(before: Date, limit: Int) async throws -> Int {
        try await purge(
            "DELETE FROM idempotency_keys WHERE ctid IN (SELECT ctid FROM idempotency_keys WHERE created_at < \(Self.micros(before)) LIMIT \(limit)) RETURNING 1"
        )
    }

    /// Whole months go first, dropped (``dropExpiredPartitions(of:before:)``); then one
    /// batch of what is left past `before` (the default partition's, a month still holding a
    /// newer row, an unpartitioned table's). Fewer than `limit` deleted means nothing is left.
    /// The rows are found again by their notification and user, which hold the partition key:
    /// each lookup reads one month's index, where one by `seq` reads every month's.
    public func purgeHistory(before: Date, limit: Int) async throws -> Int {
        let dropped = try await dropExpiredPartitions(of: .history, before: before)
        let deleted = try await purge(
            """
            DELETE FROM history WHERE (notification_id, user_id) IN (
                SELECT notification_id, user_id FROM history WHERE created_at < \(Self.micros(before)) LIMIT \(limit)
            ) RETURNING 1
            """)
        return dropped + deleted
    }

    public func purgeArchive(before: Date, limit: Int) async throws -> Int {
        // The archive keeps milliseconds, as Message Hub apps read them.
        try await purge(
            "DELETE FROM messages WHERE seq IN (SELECT seq FROM messages WHERE timestamp < \(Self.micros(before) / 1000) LIMIT \(limit)) RETURNING 1")
    }

    /// The step's notifications are read in id order from `after` up to the cutoff's second
    /// (ids begin with it), and found again by an array, so a step reads `limit` of them
    /// whatever the table holds.
    public func purgeNotifications(before: Date, after: String?, limit: Int) async throws -> NotificationPurgeStep {
        let cutoff = Self.micros(before)
        let idBound = NotificationRetention.idBound(before: cutoff)
        let from = after ?? ""
        return try await Self.retryingConflicts(logger: logger) {
            try await self.withConnection { session in
                let row = try await session.row(
                    """
                    WITH candidates AS MATERIALIZED (
                        SELECT id FROM notifications WHERE id > \(from) AND id < \(idBound) AND timestamp < \(cutoff) ORDER BY id LIMIT \(limit)
                    ), gone AS (
                        DELETE FROM notifications n WHERE n.id = ANY(ARRAY(SELECT id FROM candidates))
                            AND \(unescaped: NotificationRetention.unreferenced)
                        RETURNING 1
                    )
                    SELECT (SELECT count(*) FROM gone) AS deleted, (SELECT count(*) FROM candidates) AS examined, (SELECT max(id) FROM candidates) AS last
                    """)
                guard let row else { return NotificationPurgeStep(deleted: 0, last: nil) }
                let examined = try row.integer("examined")
                return NotificationPurgeStep(deleted: Int(try row.integer("deleted")), last: examined < limit ? nil : try row.optionalText("last"))
            }
        }
    }

    /// One bounded delete, committed by itself, run again when PostgreSQL rolled it back to
    /// break a deadlock (it locks its rows in its plan's order, beside writers that lock the
    /// same rows in id order). - Returns: the rows deleted.
    package func purge(_ query: PostgresQuery) async throws -> Int {
        try await Self.retryingConflicts(logger: logger) {
            try await withConnection { session in try await session.count(query) }
        }
    }
}
