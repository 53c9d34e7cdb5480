import Foundation
import GRDB
import HeraldCore

extension FanOutRecipients {
    /// A query of one `user_id` column listing the recipients, once each, with its arguments.
    var source: (String, StatementArguments) {
        get throws {
            switch self {
            case .subscribers(let topic):
                return ("SELECT user_id FROM subscriptions WHERE topic_key = ?", [topic])
            case .everyone,
                .audience(_) where isEveryKnownUser:
                return ("SELECT id AS user_id FROM users", [])
            case .audience(let audience) where audience.namesUsersOnly:
                // The list alone: a scheduled send to one user must not read every user there is.
                return ("SELECT DISTINCT value AS user_id FROM json_each(?)", [try StoredJSON.encode(audience.userIDs)])
            case .audience(let audience):
                // Users whose attributes match, and the users named, once each.
                let sql = """
                    SELECT id AS user_id FROM users
                    WHERE ? OR json_extract(attributes, '$.tier_id') IN (SELECT value FROM json_each(?))
                        OR EXISTS (SELECT 1 FROM json_each(users.attributes, '$.group_ids') g WHERE g.value IN (SELECT value FROM json_each(?)))
                    UNION SELECT value AS user_id FROM json_each(?)
                    """
                return (
                    sql,
                    [
                        audience.all, try StoredJSON.encode(audience.tierIDs), try StoredJSON.encode(audience.groupIDs),
                        try StoredJSON.encode(audience.userIDs),
                    ]
                )
            }
        }
    }
}

extension SQLiteStore {
    public func pendingFanOuts(limit: Int) async throws -> [FanOutJob] {
        try await writer.read { db in
            try Row.fetchAll(db, sql: FanOutJobSQL.pending(now: "?2", limit: "?1"), arguments: [limit, Self.micros(Date())]).map(FanOutJobSQL.pendingJob)
        }
    }

    public func untilNextScheduledFanOut() async throws -> Duration? {
        let until = try await writer.read { db in
            try Int64.fetchOne(db, sql: FanOutJobSQL.untilNextDue(now: "?"), arguments: [Self.micros(Date())])
        }
        return until.map { .microseconds(max($0, 0)) }
    }

    public func writeFanOutPages(_ pages: [FanOutPage], pageSize: Int) async throws -> [FanOutProgress?] {
        guard !pages.isEmpty else { return [] }
        let written = try await backgroundWrite { [modules] db -> [(progress: FanOutProgress?, historyUsers: [String])] in
            // Every job's page first, then the settings and devices of all their recipients in
            // one read: a transaction of many small jobs (sends scheduled for one user each) read
            // them a job at a time, two statements each.
            let read = try pages.map { try Self.readPage($0, pageSize: pageSize, db) }
            let recipients = try Self.recipientsByID(db, userIDs: read.flatMap { $0?.readsRecipients ?? [] })
            return try read.map { page in
                guard let page else { return (nil, []) }
                return (page.progressAfter, try Self.writePage(page, recipients: page.recipients(from: recipients), db, modules: modules))
            }
        }
        let historyUsers = written.flatMap(\.historyUsers)
        if !historyUsers.isEmpty { changes.send(.history(users: historyUsers)) }
        return written.map(\.progress)
    }

    /// The next page of one job, in the caller's transaction. - Returns: nil for no job.
    private static func readPage(_ request: FanOutPage, pageSize: Int, _ db: Database) throws -> FanOutJobPage? {
        let id = request.id
        guard let job = try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM fanout_jobs WHERE notification_id = ?"), arguments: [id.hex]) else {
            return nil
        }
        var page = try FanOutJobPage(request, job: job, pageSize: pageSize)
        guard !page.progress.done else { return page }
        let (source, arguments) = try FanOutRecipients(
            source: try job.text("source"), topic: try job.optionalText("topic_key"), audience: try job.optionalText("audience")
        ).source
        page.users = try String.fetchAll(
            db.cachedStatement(sql: "SELECT user_id FROM (\(source)) WHERE user_id > ? ORDER BY user_id LIMIT ?"),
            arguments: arguments + [page.cursor, page.size])
        if !page.users.isEmpty,
            let notification = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT timestamp, distribution, type FROM notifications WHERE id = ?"), arguments: [id.hex])
        {
            try page.carry(notification, job: job)
        }
        return page
    }

    /// Writes one page read by ``readPage(_:pageSize:_:)``, as the accepting transaction would
    /// have written its rows, and moves its job's cursor past it.
    /// - Parameter recipients: the settings and devices of its ``FanOutJobPage/readsRecipients``.
    /// - Returns: the users whose history rows were written now.
    private static func writePage(
        _ page: FanOutJobPage, recipients: [RecipientContext], _ db: Database, modules: StorageModules
    ) throws -> [String] {
        guard !page.progress.done else { return [] }
        let id = page.request.id
        let now = micros(Date())
        var historyUsers: [String] = []
        if let localInstant = page.request.localInstant {
            let waiting = try db.cachedStatement(sql: "INSERT OR IGNORE INTO scheduled_recipients (notification_id, user_id, due_at) VALUES (?, ?, ?)")
            for recipient in recipients {
                try waiting.execute(arguments: [id.hex, recipient.userID, micros(localInstant(recipient))])
            }
        } else if let notification = page.notification {
            switch page.kind {
            case .route:
                historyUsers = try insertWritingHistory(
                    recipients.flatMap(page.request.route), of: id, type: notification.type, db, at: notification.at, modules: modules
                ).historyUsers
            case .history, .historyAndDevices:
                let list = try StoredJSON.encode(page.users)
                historyUsers = try writeFanOutHistory(
                    of: id, notification.distribution, from: "SELECT value AS user_id FROM json_each(?)", [list], db, at: notification.at
                ).written
                if page.kind == .historyAndDevices {
                    let withDevices = try String.fetchAll(
                        db, sql: "SELECT DISTINCT user_id FROM devices WHERE user_id IN (SELECT value FROM json_each(?)) ORDER BY user_id", arguments: [list])
                    try insert(try Self.recipients(db, userIDs: withDevices).flatMap(page.request.route), of: id, db, at: notification.at, modules: modules)
                }
            }
        }
        try db.cachedStatement(sql: "UPDATE fanout_jobs SET cursor = ?, written = written + ?, updated_at = ?, done_at = ? WHERE notification_id = ?")
            .execute(arguments: [page.users.last ?? page.cursor, page.users.count, now, page.finishes ? now : nil, id.hex])
        return historyUsers
    }

    public func writeDueRecipients(
        limit: Int, route: @escaping @Sendable (FanOutJob, RecipientContext, Date) -> [PlannedDelivery]
    ) async throws -> Int {
        let (count, historyUsers) = try await backgroundWrite { [modules] db -> (Int, [String]) in
            let due = try Row.fetchAll(
                db, sql: "SELECT notification_id, user_id, due_at FROM scheduled_recipients WHERE due_at <= ? ORDER BY due_at LIMIT ?",
                arguments: [Self.micros(Date()), max(limit, 1)])
            guard !due.isEmpty else { return (0, []) }
            var historyUsers: [String] = []
            let waiting = try due.map(DueRecipient.init)
            for (notificationID, recipients) in Dictionary(grouping: waiting, by: \.notification) {
                let users = recipients.map(\.user)
                try db.execute(
                    sql: "DELETE FROM scheduled_recipients WHERE notification_id = ? AND user_id IN (SELECT value FROM json_each(?))",
                    arguments: [notificationID, try StoredJSON.encode(users)])
                // A job cancelled or erased since has no recipients left here; one missing is corrupt storage.
                guard let row = try Row.fetchOne(db, sql: FanOutJobSQL.jobColumns + " WHERE j.notification_id = ?", arguments: [notificationID]) else {
                    continue
                }
                let job = try FanOutJobSQL.pendingJob(row)
                // Each recipient's rows are dated with their own instant.
                for (at, planned) in DueRecipient.planned(recipients, of: job, contexts: try Self.recipients(db, userIDs: users), route: route) {
                    historyUsers += try Self.insertWritingHistory(
                        planned, of: job.notification.id, type: job.notification.type, db, at: at, modules: modules
                    ).historyUsers
                }
            }
            return (waiting.count, historyUsers)
        }
        if !historyUsers.isEmpty { changes.send(.history(users: historyUsers)) }
        return count
    }

    public func cancel(id: ObjectID, at date: Date) async throws -> Cancellation? {
        try await writer.write { db -> Cancellation? in
            guard try Row.fetchOne(db, sql: "SELECT 1 FROM notifications WHERE id = ?", arguments: [id.hex]) != nil else { return nil }
            let now = Self.micros(date)
            var recipients = 0
            if let job = try Row.fetchOne(db, sql: "SELECT recipients, written, done_at FROM fanout_jobs WHERE notification_id = ?", arguments: [id.hex]) {
                if try job.optionalInteger("done_at") == nil { recipients = max(try job.int("recipients") - job.int("written"), 0) }
                try db.execute(sql: "DELETE FROM scheduled_recipients WHERE notification_id = ?", arguments: [id.hex])
                recipients += db.changesCount
                if recipients > 0 {
                    try db.execute(
                        sql: """
                            UPDATE fanout_jobs SET done_at = COALESCE(done_at, ?), cancelled_at = ?, cancelled_recipients = ?, updated_at = ?
                            WHERE notification_id = ?
                            """,
                        arguments: [now, now, recipients, now, id.hex])
                }
            }
            try db.execute(sql: FanOutJobSQL.cancelDigestItems, arguments: [id.hex])
            try db.execute(sql: FanOutJobSQL.cancelDeliveries, arguments: [now, id.hex])
            return Cancellation(deliveries: db.changesCount, recipients: recipients)
        }
    }

    /// A notification's fan-out progress, when it has a job.
    static func fanOutProgress(_ db: Database, of id: ObjectID) throws -> FanOutProgress? {
        guard let row = try Row.fetchOne(db, sql: FanOutJobSQL.progressColumns + " WHERE j.notification_id = ?", arguments: [id.hex]) else { return nil }
        return try FanOutJobSQL.progress(row)
    }
}
