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

    /// The step's notifications are read in id order from `after` up to the cutoff's second
    /// (ids begin with it), so a step reads `limit` of them whatever the table holds.
    public func purgeNotifications(before: Date, after: String?, limit: Int) async throws -> NotificationPurgeStep {
        let cutoff = Self.micros(before)
        let idBound = NotificationRetention.idBound(before: cutoff)
        return try await writer.write { db in
            let candidates = try String.fetchAll(
                db, sql: "SELECT id FROM notifications WHERE id > ? AND id < ? AND timestamp < ? ORDER BY id LIMIT ?",
                arguments: [after ?? "", idBound, cutoff, limit])
            guard let last = candidates.last else { return NotificationPurgeStep(deleted: 0, last: nil) }
            try db.execute(
                sql: """
                    DELETE FROM notifications AS n WHERE id >= ? AND id <= ? AND timestamp < ? AND \(NotificationRetention.unreferenced)
                    """, arguments: [candidates[0], last, cutoff])
            return NotificationPurgeStep(deleted: db.changesCount, last: candidates.count < limit ? nil : last)
        }
    }

    /// One bounded delete in a transaction of its own. - Returns: the rows deleted.
    private func purge(_ sql: String, _ before: Int64, _ limit: Int) async throws -> Int {
        try await writer.write { db in
            try db.execute(sql: sql, arguments: [before, limit])
            return db.changesCount
        }
    }
}
