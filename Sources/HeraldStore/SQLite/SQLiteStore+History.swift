import Foundation
import GRDB
import HeraldCore

extension SQLiteStore {
    public func appendHistory(_ entries: [(notificationID: ObjectID, userID: String)], at date: Date) async throws {
        guard !entries.isEmpty else { return }
        try await writer.write { db in
            let statement = try db.cachedStatement(sql: "INSERT OR IGNORE INTO history (notification_id, user_id, read, created_at) VALUES (?, ?, 0, ?)")
            let now = Self.micros(date)
            for entry in entries {
                try statement.execute(arguments: [entry.notificationID.hex, entry.userID, now])
            }
        }
        changes.send(.history(users: entries.map(\.userID).uniqued()))
    }

    public func history(userID: String, after sequence: Int64, limit: Int) async throws -> [SequencedHistoryItem] {
        try await writer.read { db in
            let rows = try Row.fetchAll(
                try db.cachedStatement(
                    sql: """
                        SELECT h.seq, h.read, n.id, n.title, n.body, n.type, n.url, n.timestamp
                        FROM history h JOIN notifications n ON n.id = h.notification_id
                        WHERE h.user_id = ? AND h.seq > ?
                        ORDER BY h.seq LIMIT ?
                        """),
                arguments: [userID, sequence, limit]
            )
            return try rows.map(StoredRecords.sequencedHistoryItem)
        }
    }

    public func lastHistorySequence(userID: String) async throws -> Int64 {
        try await writer.read { db in
            try Int64.fetchOne(try db.cachedStatement(sql: "SELECT MAX(seq) FROM history WHERE user_id = ?"), arguments: [userID]) ?? 0
        }
    }

    public func history(userID: String, limit: Int, before: String?) async throws -> HistoryPage {
        let beforeSeq = try StoredRecords.sequence(before: before)
        return try await writer.read { db in
            let rows = try Row.fetchAll(
                try db.cachedStatement(
                    sql: """
                        SELECT h.seq, h.read, n.id, n.title, n.body, n.type, n.url, n.timestamp
                        FROM history h JOIN notifications n ON n.id = h.notification_id
                        WHERE h.user_id = ? AND h.seq < ?
                        ORDER BY h.seq DESC LIMIT ?
                        """),
                arguments: [userID, beforeSeq, limit + 1]
            )
            let items = try rows.prefix(limit).map(StoredRecords.historyItem)
            let next = try StoredRecords.nextCursor(rows, limit: limit)
            return HistoryPage(items: items, next: next)
        }
    }

    public func markRead(userID: String, ids: [ObjectID]) async throws -> Int {
        try await writer.write { db in
            for chunk in ids.map(\.hex).chunked(500) {
                try db.execute(
                    sql: "UPDATE history SET read = 1 WHERE user_id = ? AND read = 0 AND notification_id IN (\(Self.placeholders(chunk.count)))",
                    arguments: StatementArguments([userID]) + StatementArguments(chunk)
                )
            }
            return try Int.fetchOne(try db.cachedStatement(sql: "SELECT COUNT(*) FROM history WHERE user_id = ? AND read = 0"), arguments: [userID]) ?? 0
        }
    }
}
