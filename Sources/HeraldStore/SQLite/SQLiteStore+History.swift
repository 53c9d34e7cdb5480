import Foundation
import GRDB
import HeraldCore

extension SQLiteStore {
    public func appendHistory(_ entries: [(notificationID: ObjectID, userID: String)], at date: Date, leases: [DeliveryLease]?) async throws {
        guard !entries.isEmpty else { return }
        let now = Self.micros(date)
        let written = try await writer.write { db in
            var kept = entries
            if let leases {
                let held = try db.cachedStatement(sql: "SELECT 1 FROM deliveries WHERE id = ? AND attempts = ? AND state = 'pending'")
                kept = try zip(entries, leases).filter { _, lease in try Bool.fetchOne(held, arguments: [lease.id, lease.attempt]) != nil }.map(\.0)
            }
            try Self.writeHistory(kept.map { ($0.notificationID.hex, $0.userID) }, at: now, db)
            return kept
        }
        if !written.isEmpty { changes.send(.history(users: written.map(\.userID).uniqued())) }
    }

    /// History rows, each written once per (notification, user), and counted in the inbox's
    /// counters: for the history sink, and inside an accept for users (whose deliveries are then
    /// stored as delivered). `type` is the notifications' type when the caller has it (an
    /// accept); without it each row reads its notification's.
    static func writeHistory(_ entries: [(notification: String, user: String)], type: String? = nil, at now: Int64, _ db: Database) throws {
        guard !entries.isEmpty else { return }
        let count = try db.cachedStatement(sql: InboxSQL.countInserted)
        if let type {
            let statement = try db.cachedStatement(
                sql: "INSERT OR IGNORE INTO history (notification_id, user_id, read, created_at, type) VALUES (?, ?, 0, ?, ?)")
            for entry in entries {
                try statement.execute(arguments: [entry.notification, entry.user, now, type])
                if db.changesCount == 1 { try count.execute(arguments: [entry.user, type]) }
            }
        } else {
            let statement = try db.cachedStatement(
                sql:
                    "INSERT OR IGNORE INTO history (notification_id, user_id, read, created_at, type) VALUES ($1, ?, 0, ?, \(InboxSQL.type(of: "$1"))) RETURNING type"
            )
            for entry in entries {
                // RETURNING answers nothing for a row already there.
                if let type = try String.fetchOne(statement, arguments: [entry.notification, entry.user, now]) {
                    try count.execute(arguments: [entry.user, type])
                }
            }
        }
    }

    public func history(userID: String, after sequence: Int64, limit: Int) async throws -> [SequencedHistoryItem] {
        try await writer.read { db in
            let rows = try Row.fetchAll(
                try db.cachedStatement(
                    sql: """
                        SELECT \(StoredRecords.historyColumns)
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
                        SELECT \(StoredRecords.historyColumns)
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
}
