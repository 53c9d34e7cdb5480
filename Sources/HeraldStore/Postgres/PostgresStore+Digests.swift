import Foundation
import HeraldCore
import PostgresNIO

extension PostgresStore {
    /// The advisory lock the digest worker's steps take: one process at a time counts and
    /// releases, so a user's count is exact and a digest goes once (a space of its own).
    static let digestLockSpace: Int32 = 0x4845_5233

    /// Whether this transaction got the digest lock; another process holding it is doing the work.
    private static func takeDigestLock(_ session: PostgresSession) async throws -> Bool {
        try await session.row("SELECT pg_try_advisory_xact_lock(\(digestLockSpace), 0)::int AS taken")?.integer("taken") == 1
    }

    public func foldHeld(limit: Int) async throws -> Int {
        // Woken by every accept: nothing held (the usual case) costs one query, no transaction.
        guard try await withConnection({ session in try await session.row("SELECT 1 AS held FROM deliveries WHERE state = 'held' LIMIT 1") }) != nil
        else { return 0 }
        return try await transaction { session -> Int in
            guard try await Self.takeDigestLock(session) else { return 0 }
            let notifications = try await session.rows(
                "SELECT notification_id FROM deliveries WHERE state = 'held' GROUP BY notification_id ORDER BY MIN(id) LIMIT \(max(limit, 1))"
            ).map { try $0.text("notification_id") }
            guard !notifications.isEmpty else { return 0 }
            let held = try await session.rows(
                """
                SELECT id, notification_id, user_id, fold FROM deliveries
                WHERE state = 'held' AND notification_id = ANY(\(notifications)::text[]) ORDER BY id
                """
            ).map(HeldDelivery.init)
            let now = try await Self.databaseMicros(session)
            for group in HeldGroup.groups(held) {
                guard let mark = group.mark else {
                    try await session.execute(
                        "UPDATE deliveries SET state = 'pending', next_attempt_at = \(now), updated_at = \(now) WHERE id = ANY(\(group.ids)::int8[])")
                    continue
                }
                let stored = try await session.row(
                    "SELECT window_end, count FROM fold_counters WHERE user_id = \(group.user) AND fold_key = \(mark.key)"
                ).map { FoldCounter(windowEnd: try $0.integer("window_end"), count: try $0.integer("count")) }
                let (goesOut, counter) = FoldCounter.decide(stored, mark: mark, now: now)
                try await session.execute(
                    """
                    INSERT INTO fold_counters (user_id, fold_key, window_end, count) VALUES (\(group.user), \(mark.key), \(counter.windowEnd), \(counter.count))
                    ON CONFLICT (user_id, fold_key) DO UPDATE SET window_end = excluded.window_end, count = excluded.count
                    """)
                let state = goesOut ? DeliveryState.pending.rawValue : DeliveryState.folded.rawValue
                try await session.execute(
                    """
                    UPDATE deliveries SET state = \(state), next_attempt_at = \(goesOut ? now : nil), updated_at = \(now)
                    WHERE id = ANY(\(group.ids)::int8[])
                    """)
                if !goesOut {
                    try await session.execute(
                        """
                        INSERT INTO digest_items (user_id, fold_key, due_at, notification_id)
                        VALUES (\(group.user), \(mark.key), \(counter.windowEnd), \(group.notification)) ON CONFLICT DO NOTHING
                        """)
                }
            }
            try await session.notifyWork()
            return notifications.count
        }
    }

    public func untilNextDigest() async throws -> Duration? {
        let until = try await withConnection { session in
            try await session.row(PostgresQuery(unsafeSQL: FoldingSQL.untilNextDigest(now: Self.databaseNow)))?.optionalInteger("until")
        }
        return until.map { .microseconds(max($0, 0)) }
    }

    public func releaseDueDigests(limit: Int, compose: @escaping @Sendable (DueDigest, RecipientContext) -> ComposedDigest) async throws -> Int {
        let due = try await withConnection { session in
            try await session.row(PostgresQuery(unsafeSQL: "SELECT 1 AS due FROM digest_items WHERE due_at <= \(Self.databaseNow) LIMIT 1"))
        }
        guard due != nil else { return 0 }
        return try await transaction { session -> Int in
            guard try await Self.takeDigestLock(session) else { return 0 }
            let now = try await Self.databaseMicros(session)
            let due = try await session.rows(
                """
                SELECT user_id, fold_key, due_at FROM digest_items WHERE due_at <= \(now)
                GROUP BY user_id, fold_key, due_at ORDER BY due_at LIMIT \(max(limit, 1))
                """
            ).map { (user: try $0.text("user_id"), key: try $0.text("fold_key"), dueAt: try $0.integer("due_at")) }
            for (user, key, dueAt) in due {
                let items = try await session.rows(
                    """
                    SELECT n.* FROM digest_items d JOIN notifications n ON n.id = d.notification_id
                    WHERE d.user_id = \(user) AND d.fold_key = \(key) AND d.due_at = \(dueAt) ORDER BY n.timestamp, n.id
                    """
                ).map(StoredRecords.notification)
                try await session.execute("DELETE FROM digest_items WHERE user_id = \(user) AND fold_key = \(key) AND due_at = \(dueAt)")
                if items.count == 1, let only = items.first {
                    // One item: it goes out as itself.
                    try await session.execute(
                        """
                        UPDATE deliveries SET state = 'pending', next_attempt_at = \(now), updated_at = \(now)
                        WHERE notification_id = \(only.id.hex) AND user_id = \(user) AND state = 'folded'
                        """)
                } else if !items.isEmpty {
                    let recipient = try await Self.recipients(session, userIDs: [user]).first ?? RecipientContext(userID: user)
                    let composed = compose(DueDigest(userID: user, key: key, dueAt: Timestamp.date(microseconds: dueAt), items: items), recipient)
                    _ = try await Self.insert(composed.notification, recipients: 1, session, idempotency: nil, since: Date())
                    try await Self.insert(composed.deliveries, of: composed.notification.id, session, at: now, modules: self.modules)
                }
            }
            if !due.isEmpty { try await session.notifyWork() }
            return due.count
        }
    }

    /// The database's clock, in microseconds (``databaseNow``).
    static func databaseMicros(_ session: PostgresSession) async throws -> Int64 {
        try await session.row(PostgresQuery(unsafeSQL: "SELECT \(databaseNow) AS now"))?.integer("now") ?? micros(Date())
    }
}
