import Foundation
import GRDB
import HeraldCore

extension SQLiteStore {
    public func acceptFanOut(
        _ notification: HeraldNotification, topic: String, level: SubscriptionLevel, plan: FanOutPlan, extra: [PlannedDelivery],
        archive: ArchivedMessage?, pageSize: Int, inlineLimit: Int, idempotency: IdempotencyClaim?, idempotencySince: Date
    ) async throws -> AcceptResult {
        // Forced subjects reach every user Herald knows; others their subscribers.
        let recipients: FanOutRecipients = level == .forced ? .everyone : .subscribers(topic: topic)
        let job = try await jobRecipientCount(recipients, inlineLimit: inlineLimit)
        let (result, historyUsers) = try await writer.write { [modules] db -> (AcceptResult, [String]) in
            let now = Self.micros(notification.timestamp)
            if let earlier = try Self.insert(notification, recipients: 0, db, idempotency: idempotency, since: idempotencySince) {
                return (earlier, [])
            }
            var count = 0
            var historyUsers: [String] = []
            if let job {
                count = job
                try Self.insertJob(notification, kind: FanOutKind(plan), recipients, count: count, db, at: now)
            } else {
                let (source, arguments) = try recipients.source
                switch plan {
                case .historyOnly:
                    (count, historyUsers) = try Self.writeFanOutHistory(
                        of: notification.id, notification.distribution.rawValue, from: source, arguments, db, at: now)
                case .historyAndDevices(let route):
                    (count, historyUsers) = try Self.writeFanOutHistory(
                        of: notification.id, notification.distribution.rawValue, from: source, arguments, db, at: now)
                    _ = try Self.routePages(
                        notification, from: source, arguments, withDevicesOnly: true, pageSize: pageSize, route, db, at: now, modules: modules)
                case .route(let route):
                    (count, historyUsers) = try Self.routePages(
                        notification, from: source, arguments, withDevicesOnly: false, pageSize: pageSize, route, db, at: now, modules: modules)
                }
            }
            try Self.insert(extra, of: notification.id, db, at: now, modules: modules)
            try Self.recordRecipients(count, of: notification, idempotency: idempotency, db)
            if let archive {
                try db.execute(
                    sql: """
                        INSERT INTO messages (msi_key, topic_key, title, description, message, distribution, timestamp, sender)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        archive.msiKey, archive.topicKey, archive.title, archive.desc, archive.message, archive.distribution.rawValue, archive.timestamp,
                        archive.sender,
                    ]
                )
            }
            return (.accepted(NotificationReceipt(id: notification.id, recipients: count)), historyUsers)
        }
        if !historyUsers.isEmpty { changes.send(.history(users: historyUsers)) }
        return result
    }

    public func acceptAudience(
        _ notification: HeraldNotification, audience: Audience, route: @escaping @Sendable (RecipientContext) -> [PlannedDelivery], pageSize: Int,
        inlineLimit: Int, idempotency: IdempotencyClaim?, idempotencySince: Date
    ) async throws -> AcceptResult {
        try Self.checkFile(file)
        let recipients = FanOutRecipients.audience(audience)
        let job = try await jobRecipientCount(recipients, inlineLimit: inlineLimit)
        let (result, historyUsers) = try await writer.write { [modules] db -> (AcceptResult, [String]) in
            let now = Self.micros(notification.timestamp)
            if let earlier = try Self.insert(notification, recipients: 0, db, idempotency: idempotency, since: idempotencySince) {
                return (earlier, [])
            }
            var (count, historyUsers) = (0, [String]())
            if let job {
                count = job
                try Self.insertJob(notification, kind: .route, recipients, count: count, db, at: now)
            } else {
                let (source, arguments) = try recipients.source
                (count, historyUsers) = try Self.routePages(
                    notification, from: source, arguments, withDevicesOnly: false, pageSize: pageSize, route, db, at: now, modules: modules)
            }
            try Self.recordRecipients(count, of: notification, idempotency: idempotency, db)
            return (.accepted(NotificationReceipt(id: notification.id, recipients: count)), historyUsers)
        }
        if !historyUsers.isEmpty { changes.send(.history(users: historyUsers)) }
        return result
    }

    /// Whether a fan-out is written later, by a job: its recipients counted, in a read that does
    /// not hold the write lock (a million subscribers take a while to count), when there are
    /// more than `inlineLimit`. - Returns: the count for a job, nil to write it inline.
    private func jobRecipientCount(_ recipients: FanOutRecipients, inlineLimit: Int) async throws -> Int? {
        guard inlineLimit < Int.max else { return nil }
        let (source, arguments) = try recipients.source
        return try await writer.read { db -> Int? in
            let bounded =
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM (SELECT 1 FROM (\(source)) LIMIT ?)", arguments: arguments + [inlineLimit + 1]) ?? 0
            guard bounded > inlineLimit else { return nil }
            return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM (\(source))", arguments: arguments) ?? bounded
        }
    }

    public func acceptScheduled(
        _ notification: HeraldNotification, recipients scheduled: ScheduledRecipients, dueAt: Date?, idempotency: IdempotencyClaim?,
        idempotencySince: Date
    ) async throws -> AcceptResult {
        try Self.checkFile(file)
        let recipients = FanOutRecipients(scheduled)
        let (source, arguments) = try recipients.source
        // Counted in a read that does not hold the write lock, as a large fan-out's are.
        let count = try await writer.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM (\(source))", arguments: arguments) ?? 0 }
        return try await writer.write { db in
            if let earlier = try Self.insert(notification, recipients: count, db, idempotency: idempotency, since: idempotencySince) {
                return earlier
            }
            try Self.insertJob(notification, kind: .route, recipients, count: count, dueAt: dueAt.map(Self.micros), db, at: Self.micros(notification.timestamp))
            return .accepted(NotificationReceipt(id: notification.id, recipients: count))
        }
    }

    /// - Parameter dueAt: a scheduled send's instant; nil to write the pages at once.
    private static func insertJob(
        _ notification: HeraldNotification, kind: FanOutKind, _ recipients: FanOutRecipients, count: Int, dueAt: Int64? = nil, _ db: Database,
        at now: Int64
    ) throws {
        let (source, topic, audience) = try recipients.stored
        try db.execute(
            sql: """
                INSERT INTO fanout_jobs (notification_id, kind, source, topic_key, audience, cursor, recipients, written, created_at, updated_at, due_at)
                VALUES (?, ?, ?, ?, ?, '', ?, 0, ?, ?, ?)
                """,
            arguments: [notification.id.hex, kind.rawValue, source, topic, audience, count, now, now, dueAt]
        )
    }

    /// A fan-out learns its recipient count as it writes: stored on the notification and on its
    /// idempotency key, so a replay answers the same count.
    private static func recordRecipients(_ recipients: Int, of notification: HeraldNotification, idempotency: IdempotencyClaim?, _ db: Database) throws {
        try db.execute(sql: "UPDATE notifications SET recipients = ? WHERE id = ?", arguments: [recipients, notification.id.hex])
        if let claim = idempotency {
            try db.execute(sql: "UPDATE idempotency_keys SET recipients = ? WHERE scope = ? AND key = ?", arguments: [recipients, claim.scope, claim.key])
        }
    }

    /// History rows for every user `source` lists, entirely inside SQLite, recorded as delivered
    /// history deliveries (one queue round-trip per row saved): in the accepting transaction, or
    /// one fan-out job page; the rows are counted in the inbox's counters. - Returns: the number of
    /// recipients, and the users whose rows were
    /// written now, for live streams to hear of once committed.
    static func writeFanOutHistory(
        of id: ObjectID, _ distribution: String, from source: String, _ arguments: StatementArguments, _ db: Database, at now: Int64
    ) throws -> (recipients: Int, written: [String]) {
        try db.execute(
            sql: """
                INSERT INTO deliveries (notification_id, sink, user_id, distribution, state, attempts, next_attempt_at, updated_at)
                SELECT ?, ?, user_id, ?, 'delivered', 1, NULL, ? FROM (\(source))
                """,
            arguments: [id.hex, NotificationRouter.historySink, distribution, now] + arguments
        )
        let recipients = db.changesCount
        let last = try Int64.fetchOne(db, sql: "SELECT COALESCE(MAX(seq), 0) FROM history") ?? 0
        let written = try String.fetchAll(
            db,
            sql:
                "INSERT OR IGNORE INTO history (notification_id, user_id, read, created_at, type) SELECT $1, user_id, 0, ?, \(InboxSQL.type(of: "$1")) FROM (\(source)) RETURNING user_id",
            arguments: [id.hex, now] + arguments
        )
        if !written.isEmpty { try db.execute(sql: InboxSQL.countFanOutPage, arguments: [last]) }
        return (recipients, written)
    }

    /// Keyset pages: each page's settings and devices are read, routed and written before the
    /// next is read, with the history rows routed to (``insertWritingHistory(_:of:type:_:at:handOff:modules:)``),
    /// unless only users with devices are paged, whose history was written for every recipient.
    /// - Returns: the number of users paged through, and those whose history rows were written.
    private static func routePages(
        _ notification: HeraldNotification, from source: String, _ arguments: StatementArguments, withDevicesOnly: Bool, pageSize: Int,
        _ route: (RecipientContext) -> [PlannedDelivery], _ db: Database, at now: Int64, modules: StorageModules
    ) throws -> (paged: Int, historyUsers: [String]) {
        let filter = withDevicesOnly ? " AND EXISTS (SELECT 1 FROM devices d WHERE d.user_id = s.user_id)" : ""
        var paged = 0
        var historyUsers: [String] = []
        var after = ""
        while true {
            let page = try String.fetchAll(
                db, sql: "SELECT user_id FROM (\(source)) s WHERE user_id > ?\(filter) ORDER BY user_id LIMIT ?",
                arguments: arguments + [after, pageSize]
            )
            guard let last = page.last else { break }
            let planned = try recipients(db, userIDs: page).flatMap(route)
            if withDevicesOnly {
                try insert(planned, of: notification.id, db, at: now, modules: modules)
            } else {
                historyUsers += try insertWritingHistory(planned, of: notification.id, type: notification.type, db, at: now, modules: modules).historyUsers
            }
            paged += page.count
            after = last
        }
        return (paged, historyUsers)
    }

    public func messages(topicKey: String?, limit: Int, before: String?) async throws -> MessagePage {
        let beforeSeq = try StoredRecords.sequence(before: before)
        return try await writer.read { db in
            var sql = "SELECT * FROM messages WHERE seq < ?"
            var arguments: StatementArguments = [beforeSeq]
            if let topicKey {
                sql += " AND topic_key = ?"
                arguments += [topicKey]
            }
            let rows = try Row.fetchAll(db, sql: sql + " ORDER BY seq DESC LIMIT ?", arguments: arguments + [limit + 1])
            let messages = try rows.prefix(limit).map(StoredRecords.archivedMessage)
            let next = try StoredRecords.nextCursor(rows, limit: limit)
            return MessagePage(messages: messages, next: next)
        }
    }

    public func archivedMessage(msiKey: String) async throws -> ArchivedMessage? {
        try await writer.read { db in
            try Row.fetchOne(try db.cachedStatement(sql: "SELECT * FROM messages WHERE msi_key = ?"), arguments: [msiKey]).map(StoredRecords.archivedMessage)
        }
    }
}
