import Foundation
import HeraldCore
import PostgresNIO

extension FanOutRecipients {
    /// Up to `limit` recipients after `cursor`, in user-id order (keyset pages), optionally only
    /// those with a device.
    func page(after cursor: String, limit: Int, withDevicesOnly: Bool = false) -> PostgresQuery {
        switch self {
        case .subscribers(let topic):
            """
            SELECT user_id FROM subscriptions s WHERE topic_key = \(topic) AND user_id > \(cursor)
                AND (NOT \(withDevicesOnly) OR EXISTS (SELECT 1 FROM devices d WHERE d.user_id = s.user_id))
            ORDER BY user_id LIMIT \(limit)
            """
        case .everyone:
            """
            SELECT id AS user_id FROM users u WHERE id > \(cursor)
                AND (NOT \(withDevicesOnly) OR EXISTS (SELECT 1 FROM devices d WHERE d.user_id = u.id))
            ORDER BY id LIMIT \(limit)
            """
        case .audience(let audience):
            // Users whose attributes match, and the users named, once each.
            """
            SELECT user_id FROM (
                SELECT id AS user_id FROM users
                WHERE \(audience.all) OR (attributes::jsonb ->> 'tier_id') = ANY(\(audience.tierIDs)::text[])
                    OR COALESCE(attributes::jsonb -> 'group_ids', '[]'::jsonb) ?| \(audience.groupIDs)::text[]
                UNION SELECT unnest(\(audience.userIDs)::text[])
            ) s WHERE user_id > \(cursor)
                AND (NOT \(withDevicesOnly) OR EXISTS (SELECT 1 FROM devices d WHERE d.user_id = s.user_id))
            ORDER BY user_id LIMIT \(limit)
            """
        }
    }

    /// How many recipients there are, counting no further than `limit` (nil: all of them).
    func count(upTo limit: Int?) -> PostgresQuery {
        switch self {
        case .subscribers(let topic):
            "SELECT COUNT(*) AS n FROM (SELECT 1 FROM subscriptions WHERE topic_key = \(topic) LIMIT \(limit)) s"
        case .everyone:
            "SELECT COUNT(*) AS n FROM (SELECT 1 FROM users LIMIT \(limit)) s"
        case .audience(let audience):
            """
            SELECT COUNT(*) AS n FROM (
                SELECT id AS user_id FROM users
                WHERE \(audience.all) OR (attributes::jsonb ->> 'tier_id') = ANY(\(audience.tierIDs)::text[])
                    OR COALESCE(attributes::jsonb -> 'group_ids', '[]'::jsonb) ?| \(audience.groupIDs)::text[]
                UNION SELECT unnest(\(audience.userIDs)::text[])
                LIMIT \(limit)
            ) s
            """
        }
    }
}

extension PostgresStore {
    /// Whether a fan-out is written later, by a job: its recipients counted outside the
    /// accepting transaction when there are more than `inlineLimit`.
    /// - Returns: the count for a job, nil to write it inline.
    func jobRecipientCount(_ recipients: FanOutRecipients, inlineLimit: Int) async throws -> Int? {
        guard inlineLimit < Int.max else { return nil }
        return try await withConnection { session -> Int? in
            let bounded = try await session.row(recipients.count(upTo: inlineLimit + 1))?.int("n") ?? 0
            guard bounded > inlineLimit else { return nil }
            return try await session.row(recipients.count(upTo: nil))?.int("n") ?? bounded
        }
    }

    static func insertJob(
        _ notification: HeraldNotification, kind: FanOutKind, _ recipients: FanOutRecipients, count: Int, _ session: PostgresSession, at now: Int64
    ) async throws {
        let (source, topic, audience) = try recipients.stored
        try await session.execute(
            """
            INSERT INTO fanout_jobs (notification_id, kind, source, topic_key, audience, cursor, recipients, written, created_at, updated_at)
            VALUES (\(notification.id.hex), \(kind.rawValue), \(source), \(topic), \(audience), '', \(count), 0, \(now), \(now))
            """
        )
    }

    public func pendingFanOuts(limit: Int) async throws -> [FanOutJob] {
        try await withConnection { session in
            var query = PostgresQuery(unsafeSQL: FanOutJobSQL.pendingColumns + " LIMIT $1")
            query.binds.append(limit)
            return try await session.rows(query).map(FanOutJobSQL.pendingJob)
        }
    }

    public func writeFanOutPage(
        of id: ObjectID, pageSize: Int, route: @escaping @Sendable (RecipientContext) -> [PlannedDelivery]
    ) async throws -> FanOutProgress? {
        try await transaction { session -> FanOutProgress? in
            // Processes working the same job take turns here; each reads the cursor the last left.
            guard let job = try await session.row("SELECT * FROM fanout_jobs WHERE notification_id = \(id.hex) FOR UPDATE") else { return nil }
            let (total, written) = (try job.int("recipients"), try job.int("written"))
            guard try job.optionalInteger("done_at") == nil else { return FanOutProgress(recipients: total, written: written, done: true) }
            let kind = try FanOutJobSQL.kind(job)
            let source = try FanOutRecipients(
                source: try job.text("source"), topic: try job.optionalText("topic_key"), audience: try job.optionalText("audience"))
            let cursor = try job.text("cursor")
            let size = max(pageSize, 1)
            let page = try await session.rows(source.page(after: cursor, limit: size)).map { try $0.text("user_id") }
            let now = Self.micros(Date())
            if !page.isEmpty, let notification = try await session.row("SELECT timestamp, distribution FROM notifications WHERE id = \(id.hex)") {
                // Rows carry the accept's time, as the accepting transaction would have written them.
                let acceptedAt = try notification.integer("timestamp")
                switch kind {
                case .route:
                    try await Self.insert(try await Self.recipients(session, userIDs: page).flatMap(route), of: id, session, at: acceptedAt)
                case .history, .historyAndDevices:
                    _ = try await Self.writeFanOutHistory(
                        of: id, distribution: try notification.text("distribution"), for: .listed(page), session, at: acceptedAt)
                    if kind == .historyAndDevices {
                        let withDevices = try await session.rows(
                            "SELECT DISTINCT user_id FROM devices WHERE user_id = ANY(\(page)::text[]) ORDER BY user_id"
                        ).map { try $0.text("user_id") }
                        try await Self.insert(try await Self.recipients(session, userIDs: withDevices).flatMap(route), of: id, session, at: acceptedAt)
                    }
                }
                try await session.notifyWork()
            }
            let done = page.count < size
            try await session.execute(
                """
                UPDATE fanout_jobs SET cursor = \(page.last ?? cursor), written = written + \(page.count), updated_at = \(now),
                    done_at = \(done ? now : nil) WHERE notification_id = \(id.hex)
                """
            )
            return FanOutProgress(recipients: total, written: written.saturatingAdd(page.count), done: done)
        }
    }

    /// A notification's fan-out progress, when it has a job.
    static func fanOutProgress(_ session: PostgresSession, of id: ObjectID) async throws -> FanOutProgress? {
        guard let row = try await session.row("SELECT recipients, written, done_at FROM fanout_jobs WHERE notification_id = \(id.hex)") else { return nil }
        return FanOutProgress(recipients: try row.int("recipients"), written: try row.int("written"), done: try row.optionalInteger("done_at") != nil)
    }
}
