import Foundation
import HeraldCore
import PostgresNIO

extension PostgresStore {
    public func appendHistory(_ entries: [(notificationID: ObjectID, userID: String)], at date: Date) async throws {
        guard !entries.isEmpty else { return }
        let now = Self.micros(date)
        try await transaction { session in try await Self.writeHistory(entries.map { ($0.notificationID.hex, $0.userID, now) }, session) }
    }

    /// History rows, each written once per (notification, user), in per-user order, and
    /// announced to live streams: for the history sink, and inside an accept for users (whose
    /// deliveries are then stored as delivered).
    static func writeHistory(_ entries: [(notification: String, user: String, at: Int64)], _ session: PostgresSession) async throws {
        guard !entries.isEmpty else { return }
        let notifications = entries.map(\.notification)
        let users = entries.map(\.user)
        let times = entries.map(\.at)
        try await lockHistory(of: users, session)
        try await session.execute(
            """
            INSERT INTO history (notification_id, user_id, read, created_at)
            SELECT notification_id, user_id, 0, created_at
            FROM UNNEST(\(notifications)::text[], \(users)::text[], \(times)::int8[]) AS entry(notification_id, user_id, created_at)
            ON CONFLICT (notification_id, user_id) DO NOTHING
            """
        )
        try await session.announce(.history(users: users.uniqued()))
    }

    /// The first key of the advisory locks that order history writes per user.
    static let historyLockSpace: Int32 = 0x4845_5231

    /// One writer per user at a time, so each user's sequences commit in order and a stream
    /// resuming after the last one it saw cannot skip a row committed late. Locks are taken in
    /// sorted order: two transactions never wait on each other in a cycle.
    static func lockHistory(of users: [String], _ session: PostgresSession) async throws {
        try await session.execute(
            """
            SELECT pg_advisory_xact_lock(\(historyLockSpace), hashtext(user_id))
            FROM (SELECT DISTINCT user_id FROM UNNEST(\(users)::text[]) AS u(user_id) ORDER BY user_id) AS sorted
            """
        )
    }

    public func history(userID: String, after sequence: Int64, limit: Int) async throws -> [SequencedHistoryItem] {
        try await withConnection { session in
            try await session.rows(
                """
                SELECT h.seq, h.read, n.id, n.title, n.body, n.type, n.url, n.timestamp
                FROM history h JOIN notifications n ON n.id = h.notification_id
                WHERE h.user_id = \(userID) AND h.seq > \(sequence)
                ORDER BY h.seq LIMIT \(limit)
                """
            ).map(StoredRecords.sequencedHistoryItem)
        }
    }

    public func lastHistorySequence(userID: String) async throws -> Int64 {
        try await withConnection { session in
            try await session.row("SELECT COALESCE(MAX(seq), 0) AS last FROM history WHERE user_id = \(userID)")?.integer("last") ?? 0
        }
    }

    public func history(userID: String, limit: Int, before: String?) async throws -> HistoryPage {
        let beforeSeq = try StoredRecords.sequence(before: before)
        return try await withConnection { session in
            let rows = try await session.rows(
                """
                SELECT h.seq, h.read, n.id, n.title, n.body, n.type, n.url, n.timestamp
                FROM history h JOIN notifications n ON n.id = h.notification_id
                WHERE h.user_id = \(userID) AND h.seq < \(beforeSeq)
                ORDER BY h.seq DESC LIMIT \(limit + 1)
                """
            )
            return HistoryPage(items: try rows.prefix(limit).map(StoredRecords.historyItem), next: try StoredRecords.nextCursor(rows, limit: limit))
        }
    }

    public func markRead(userID: String, ids: [ObjectID]) async throws -> Int {
        let hexIDs = ids.map(\.hex)
        return try await transaction { session in
            try await session.execute("UPDATE history SET read = 1 WHERE user_id = \(userID) AND read = 0 AND notification_id = ANY(\(hexIDs))")
            return try await session.row("SELECT COUNT(*) AS unread FROM history WHERE user_id = \(userID) AND read = 0")?.int("unread") ?? 0
        }
    }
}
