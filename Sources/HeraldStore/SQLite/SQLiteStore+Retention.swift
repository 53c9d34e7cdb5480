import Foundation
import GRDB
import HeraldCore

extension SQLiteStore {
    public func purgeFinishedDeliveries(before: Date, limit: Int) async throws -> Int {
        try await purge(
            "DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries WHERE \(FoldingSQL.finishedDelivery) AND updated_at < ? LIMIT ?)",
            Self.micros(before), limit)
    }

    public func purgeIdempotencyKeys(before: Date, limit: Int) async throws -> Int {
        try await purge(
            "DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys WHERE created_at < ? LIMIT ?)", Self.micros(before), limit)
    }

    public func purgeHistory(before: Date, limit: Int) async throws -> Int {
        try await purge("DELETE FROM history WHERE seq IN (SELECT seq FROM history WHERE created_at < ? LIMIT ?)", Self.micros(before), limit)
    }

    public func purgeArchive(before: Date, limit: Int) async throws -> Int {
        // The archive keeps milliseconds, as Message Hub apps read them.
        try await purge("DELETE FROM messages WHERE seq IN (SELECT seq FROM messages WHERE timestamp < ? LIMIT ?)", Self.micros(before) / 1000, limit)
    }

    public func purgeNotifications(before: Date, limit: Int) async throws -> Int {
        try await purge(
            """
            DELETE FROM notifications WHERE id IN (
                SELECT id FROM notifications n WHERE timestamp < ?
                    AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.notification_id = n.id)
                    AND NOT EXISTS (SELECT 1 FROM history h WHERE h.notification_id = n.id)
                    AND NOT EXISTS (SELECT 1 FROM fanout_jobs j WHERE j.notification_id = n.id AND j.done_at IS NULL)
                    AND \(FoldingSQL.stillWaiting)
                LIMIT ?)
            """, Self.micros(before), limit
        )
    }

    /// One bounded delete in a transaction of its own. - Returns: the rows deleted.
    private func purge(_ sql: String, _ before: Int64, _ limit: Int) async throws -> Int {
        try await writer.write { db in
            try db.execute(sql: sql, arguments: [before, limit])
            return db.changesCount
        }
    }
}
