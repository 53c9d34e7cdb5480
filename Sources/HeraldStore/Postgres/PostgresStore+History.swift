import Foundation
import HeraldCore
import PostgresNIO

extension PostgresStore {
    public func appendHistory(_ entries: [(notificationID: ObjectID, userID: String)], at date: Date, leases: [DeliveryLease]?) async throws {
        guard !entries.isEmpty else { return }
        let now = Self.micros(date)
        try await transaction { session in
            try await Self.writeHistory(entries.map { ($0.notificationID.hex, $0.userID, now) }, leases: leases, session)
        }
    }

    /// History rows, each written once per (notification, user), in per-user order, and
    /// announced to live streams: for the history sink. An accept for users writes its own with
    /// its other rows, under the same lock. With `leases`, only the rows whose deliveries still
    /// hold them: under the users' locks, which an erasure takes before failing their
    /// deliveries, it has either failed these already or waits for these rows and deletes them.
    static func writeHistory(
        _ entries: [(notification: String, user: String, at: Int64)], leases: [DeliveryLease]?, _ session: PostgresSession
    ) async throws {
        guard !entries.isEmpty else { return }
        try await lockHistory(of: entries.map(\.user), session)
        var kept = entries
        if let leases {
            let held = Set(
                try await session.rows(
                    """
                    SELECT d.id FROM deliveries d
                    JOIN UNNEST(\(leases.map(\.id))::int8[], \(leases.map { Int64($0.attempt) })::int8[]) AS l(id, attempt)
                        ON d.id = l.id AND d.attempts = l.attempt
                    WHERE d.state = 'pending'
                    """
                ).map { try $0.integer("id") })
            kept = zip(entries, leases).filter { held.contains($1.id) }.map(\.0)
        }
        guard !kept.isEmpty else { return }
        try await write(StoredWrites(history: kept), session)
    }

    /// The first key of the advisory locks that order history writes per user.
    static let historyLockSpace: Int32 = 0x4845_5231
    /// The first key of the one advisory lock that fan-outs take alone and per-user writers
    /// share (a space of its own: no user's key can collide with it).
    static let fanOutHistoryLockSpace: Int32 = 0x4845_5232

    /// One writer per user at a time, so each user's sequences commit in order and a stream
    /// resuming after the last one it saw cannot skip a row committed late. Locks are taken in
    /// sorted order, after the shared fan-out lock: two transactions never wait on each other in
    /// a cycle. The same lock orders an accept's read of a user's devices with whatever takes a
    /// device from them or erases them (``lockOwners(ofMoving:_:)``, `eraseUser`,
    /// `unregisterDevice`); those lock their device rows first, and an accept locks no device
    /// row, so neither waits for the other while holding what the other needs.
    static func lockHistory(of users: [String], _ session: PostgresSession) async throws {
        _ = try await session.rows(HistoryLockStatement(users: users))
    }

    /// ``lockHistory(of:_:)``'s locks in one statement.
    struct HistoryLockStatement: PreparedQuery {
        static let name = "herald_history_lock"
        static let sql = HistoryLockStatement(users: []).query.sql
        let query: PostgresQuery

        init(users: [String]) {
            // Append runs its branches in order: the shared lock is held before any user's.
            query = """
                SELECT pg_advisory_xact_lock_shared(\(fanOutHistoryLockSpace), 0)
                UNION ALL
                SELECT pg_advisory_xact_lock(\(historyLockSpace), hashtext(user_id))
                FROM (SELECT DISTINCT user_id FROM UNNEST(\(users)::text[]) AS u(user_id) ORDER BY user_id) AS sorted
                """
        }
    }

    /// A fan-out writes history for too many users to lock each: it waits for every per-user
    /// writer to commit and holds them off until it commits, which orders its rows with theirs
    /// for every user at once.
    static func lockAllHistory(_ session: PostgresSession) async throws {
        try await session.execute("SELECT pg_advisory_xact_lock(\(fanOutHistoryLockSpace), 0)")
    }

    /// Whose history a fan-out writes: every user, a topic's subscribers, or one page of them.
    enum FanOutHistoryRecipients {
        case everyone
        case subscribers(topic: String)
        case listed([String])
    }

    /// A fan-out's history rows, one statement that reads nothing into memory whatever the
    /// topic's size: it records them as delivered history deliveries (one queue round-trip per
    /// row saved), writes the rows and announces them to live streams, after
    /// ``lockAllHistory(_:)``. In the accepting transaction, or one fan-out job page.
    /// - Returns: the number of recipients.
    static func writeFanOutHistory(
        of id: ObjectID, distribution: String, for recipients: FanOutHistoryRecipients, _ session: PostgresSession, at now: Int64
    ) async throws -> Int {
        var everyone = false
        var topic: String?
        var listed: [String] = []
        switch recipients {
        case .everyone: everyone = true
        case .subscribers(let key): topic = key
        case .listed(let users): listed = users
        }
        try await lockAllHistory(session)
        // One statement for the three kinds: the branches not asked for select nothing.
        let query: PostgresQuery = """
            WITH recipients AS (
                SELECT id AS user_id FROM users WHERE \(everyone)
                UNION ALL
                SELECT user_id FROM subscriptions WHERE topic_key = \(topic)
                UNION ALL
                SELECT UNNEST(\(listed)::text[]) AS user_id
            ), recorded AS (
                INSERT INTO deliveries (notification_id, sink, user_id, distribution, state, attempts, next_attempt_at, updated_at)
                SELECT \(id.hex), \(NotificationRouter.historySink), user_id, \(distribution), 'delivered', 1, NULL, \(now)
                FROM recipients
                RETURNING 1
            ), written AS (
                INSERT INTO history (notification_id, user_id, read, created_at, type)
                SELECT \(id.hex), user_id, 0, \(now), (SELECT type FROM notifications WHERE id = \(id.hex)) FROM recipients
                ON CONFLICT (notification_id, user_id) DO NOTHING
                RETURNING user_id
            ), \(unescaped: StoreChangeMessage.historyNotices(of: "written", channel: changeChannel))
            SELECT (SELECT COUNT(*) FROM recorded) AS n, (SELECT COUNT(*) FROM announced) AS notices
            """
        return try await session.row(query)?.int("n") ?? 0
    }

    public func history(userID: String, after sequence: Int64, limit: Int) async throws -> [SequencedHistoryItem] {
        try await withConnection { session in
            try await session.rows(
                """
                SELECT \(unescaped: StoredRecords.historyColumns)
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
        // A page may lag the primary by up to a second (docs/scaling.md, "Read replicas").
        return try await withReadConnection { session in
            let rows = try await session.rows(HistoryPageStatement(userID: userID, before: beforeSeq, limit: limit + 1))
            return HistoryPage(items: try rows.prefix(limit).map(StoredRecords.historyItem), next: try StoredRecords.nextCursor(rows, limit: limit))
        }
    }

    /// A page of a user's history, newest first: what apps read most after the 304s, prepared.
    /// Its plan names every history month (each month's rows are read in order and merged), and
    /// planning that at every call cost more than running it (docs/performance.md, "The cards'
    /// 304 on PostgreSQL").
    struct HistoryPageStatement: PreparedQuery {
        static let name = "herald_history_page"
        static let sql = HistoryPageStatement(userID: "", before: 0, limit: 0).query.sql
        let query: PostgresQuery

        init(userID: String, before: Int64, limit: Int) {
            query = """
                SELECT \(unescaped: StoredRecords.historyColumns)
                FROM history h JOIN notifications n ON n.id = h.notification_id
                WHERE h.user_id = \(userID) AND h.seq < \(before)
                ORDER BY h.seq DESC LIMIT \(limit)
                """
        }
    }
}
