import Foundation
import HeraldCore
import PostgresNIO

extension PostgresStore {
    public func acceptFanOut(
        _ notification: HeraldNotification, topic: String, level: SubscriptionLevel, plan: FanOutPlan, extra: [PlannedDelivery],
        archive: ArchivedMessage?, pageSize: Int, inlineLimit: Int, idempotency: IdempotencyClaim?, idempotencySince: Date
    ) async throws -> AcceptResult {
        // Forced subjects reach every user Herald knows; others their subscribers.
        let recipients: FanOutRecipients = level == .forced ? .everyone : .subscribers(topic: topic)
        let job = try await jobRecipientCount(recipients, inlineLimit: inlineLimit)
        return try await transaction { session in
            let now = Self.micros(notification.timestamp)
            if let earlier = try await Self.insert(notification, recipients: 0, session, idempotency: idempotency, since: idempotencySince) {
                return earlier
            }
            let history: FanOutHistoryRecipients = level == .forced ? .everyone : .subscribers(topic: topic)
            var count = 0
            if let job {
                count = job
                try await Self.insertJob(notification, kind: FanOutKind(plan), recipients, count: count, session, at: now)
            } else {
                switch plan {
                case .historyOnly:
                    count = try await Self.writeFanOutHistory(
                        of: notification.id, distribution: notification.distribution.rawValue, for: history, session, at: now)
                case .historyAndDevices(let route):
                    count = try await Self.writeFanOutHistory(
                        of: notification.id, distribution: notification.distribution.rawValue, for: history, session, at: now)
                    _ = try await Self.routePages(
                        notification, recipients, withDevicesOnly: true, pageSize: pageSize, route, session, at: now, modules: self.modules)
                case .route(let route):
                    count = try await Self.routePages(
                        notification, recipients, withDevicesOnly: false, pageSize: pageSize, route, session, at: now, modules: self.modules)
                }
            }
            try await Self.insert(extra, of: notification.id, session, at: now, modules: self.modules)
            try await Self.recordRecipients(count, of: notification, idempotency: idempotency, session)
            if let archive {
                try await session.execute(
                    """
                    INSERT INTO messages (msi_key, topic_key, title, description, message, distribution, timestamp, sender)
                    VALUES (\(archive.msiKey), \(archive.topicKey), \(archive.title), \(archive.desc), \(archive.message),
                        \(archive.distribution.rawValue), \(archive.timestamp), \(archive.sender))
                    """
                )
            }
            try await session.notifyWork()
            return .accepted(NotificationReceipt(id: notification.id, recipients: count))
        }
    }

    public func acceptAudience(
        _ notification: HeraldNotification, audience: Audience, route: @escaping @Sendable (RecipientContext) -> [PlannedDelivery], pageSize: Int,
        inlineLimit: Int, idempotency: IdempotencyClaim?, idempotencySince: Date
    ) async throws -> AcceptResult {
        let recipients = FanOutRecipients.audience(audience)
        let job = try await jobRecipientCount(recipients, inlineLimit: inlineLimit)
        return try await transaction { session in
            let now = Self.micros(notification.timestamp)
            if let earlier = try await Self.insert(notification, recipients: 0, session, idempotency: idempotency, since: idempotencySince) {
                return earlier
            }
            let count: Int
            if let job {
                count = job
                try await Self.insertJob(notification, kind: .route, recipients, count: count, session, at: now)
            } else {
                count = try await Self.routePages(
                    notification, recipients, withDevicesOnly: false, pageSize: pageSize, route, session, at: now, modules: self.modules)
            }
            try await Self.recordRecipients(count, of: notification, idempotency: idempotency, session)
            try await session.notifyWork()
            return .accepted(NotificationReceipt(id: notification.id, recipients: count))
        }
    }

    /// A fan-out learns its recipient count as it writes: stored on the notification and on its
    /// idempotency key, so a replay answers the same count.
    private static func recordRecipients(
        _ recipients: Int, of notification: HeraldNotification, idempotency: IdempotencyClaim?, _ session: PostgresSession
    ) async throws {
        try await session.execute("UPDATE notifications SET recipients = \(recipients) WHERE id = \(notification.id.hex)")
        if let claim = idempotency {
            try await session.execute("UPDATE idempotency_keys SET recipients = \(recipients) WHERE scope = \(claim.scope) AND key = \(claim.key)")
        }
    }

    /// Keyset pages: each page's settings and devices are read, routed and written before the
    /// next is read, with the history rows routed to (``insert(_:of:_:at:writingHistory:modules:)``)
    /// under the page's users' locks, taken in user order page after page as an accept takes
    /// them; unless only users with devices are paged, whose history was written for every
    /// recipient. - Returns: the number of users paged through.
    private static func routePages(
        _ notification: HeraldNotification, _ recipients: FanOutRecipients, withDevicesOnly: Bool, pageSize: Int,
        _ route: (RecipientContext) -> [PlannedDelivery], _ session: PostgresSession, at now: Int64, modules: StorageModules
    ) async throws -> Int {
        var paged = 0
        var after = ""
        while true {
            let page = try await session.rows(recipients.page(after: after, limit: pageSize, withDevicesOnly: withDevicesOnly)).map { try $0.text("user_id") }
            guard let last = page.last else { break }
            if !withDevicesOnly { try await lockHistory(of: page, session) }
            try await insert(
                try await Self.recipients(session, userIDs: page).flatMap(route), of: notification.id, session, at: now, writingHistory: !withDevicesOnly,
                modules: modules)
            paged += page.count
            after = last
        }
        return paged
    }

    public func messages(topicKey: String?, limit: Int, before: String?) async throws -> MessagePage {
        let beforeSeq = try StoredRecords.sequence(before: before)
        return try await withConnection { session in
            let rows = try await session.rows(
                """
                SELECT * FROM messages WHERE seq < \(beforeSeq) AND (\(topicKey)::text IS NULL OR topic_key = \(topicKey))
                ORDER BY seq DESC LIMIT \(limit + 1)
                """
            )
            return MessagePage(
                messages: try rows.prefix(limit).map(StoredRecords.archivedMessage), next: try StoredRecords.nextCursor(rows, limit: limit)
            )
        }
    }

    public func archivedMessage(msiKey: String) async throws -> ArchivedMessage? {
        try await withConnection { session in
            try await session.row("SELECT * FROM messages WHERE msi_key = \(msiKey)").map(StoredRecords.archivedMessage)
        }
    }
}
