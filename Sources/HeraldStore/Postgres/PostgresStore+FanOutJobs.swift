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
        case .everyone,
            .audience(_) where isEveryKnownUser:
            """
            SELECT id AS user_id FROM users u WHERE id > \(cursor)
                AND (NOT \(withDevicesOnly) OR EXISTS (SELECT 1 FROM devices d WHERE d.user_id = u.id))
            ORDER BY id LIMIT \(limit)
            """
        case .audience(let audience) where audience.namesUsersOnly:
            // The list alone: a scheduled send to one user must not read every user there is.
            """
            SELECT user_id FROM (SELECT DISTINCT unnest(\(audience.userIDs)::text[]) AS user_id) s WHERE user_id > \(cursor)
                AND (NOT \(withDevicesOnly) OR EXISTS (SELECT 1 FROM devices d WHERE d.user_id = s.user_id))
            ORDER BY user_id LIMIT \(limit)
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
        case .everyone,
            .audience(_) where isEveryKnownUser:
            "SELECT COUNT(*) AS n FROM (SELECT 1 FROM users LIMIT \(limit)) s"
        case .audience(let audience) where audience.namesUsersOnly:
            "SELECT COUNT(*) AS n FROM (SELECT DISTINCT unnest(\(audience.userIDs)::text[]) LIMIT \(limit)) s"
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

    /// - Parameter dueAt: a scheduled send's instant; nil to write the pages at once.
    static func insertJob(
        _ notification: HeraldNotification, kind: FanOutKind, _ recipients: FanOutRecipients, count: Int, dueAt: Int64? = nil,
        _ session: PostgresSession, at now: Int64
    ) async throws {
        let (source, topic, audience) = try recipients.stored
        try await session.execute(
            """
            INSERT INTO fanout_jobs (notification_id, kind, source, topic_key, audience, cursor, recipients, written, created_at, updated_at, due_at)
            VALUES (\(notification.id.hex), \(kind.rawValue), \(source), \(topic), \(audience), '', \(count), 0, \(now), \(now), \(dueAt))
            """
        )
    }

    /// The database's clock, in microseconds: when a scheduled send is due is judged by it, the
    /// same for every process, so one whose own clock steps ahead does not fire a send early.
    static let databaseNow = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"

    public func pendingFanOuts(limit: Int) async throws -> [FanOutJob] {
        try await withConnection { session in
            var query = PostgresQuery(unsafeSQL: FanOutJobSQL.pending(now: Self.databaseNow, limit: "$1"))
            query.binds.append(limit)
            return try await session.rows(query).map(FanOutJobSQL.pendingJob)
        }
    }

    public func untilNextScheduledFanOut() async throws -> Duration? {
        let until = try await withConnection { session in
            try await session.row(PostgresQuery(unsafeSQL: FanOutJobSQL.untilNextDue(now: Self.databaseNow)))?.optionalInteger("until")
        }
        return until.map { .microseconds(max($0, 0)) }
    }

    public func acceptScheduled(
        _ notification: HeraldNotification, recipients scheduled: ScheduledRecipients, dueAt: Date?, idempotency: IdempotencyClaim?,
        idempotencySince: Date
    ) async throws -> AcceptResult {
        let recipients = FanOutRecipients(scheduled)
        // Counted outside the accepting transaction, as a large fan-out's are.
        let count = try await withConnection { session in try await session.row(recipients.count(upTo: nil))?.int("n") ?? 0 }
        return try await transaction { session in
            if let earlier = try await Self.insert(notification, recipients: count, session, idempotency: idempotency, since: idempotencySince) {
                return earlier
            }
            try await Self.insertJob(
                notification, kind: .route, recipients, count: count, dueAt: dueAt.map(Self.micros), session, at: Self.micros(notification.timestamp))
            // Every process's worker hears of it and sleeps no longer than until it is due.
            try await session.notifyWork()
            return .accepted(NotificationReceipt(id: notification.id, recipients: count))
        }
    }

    public func writeFanOutPages(_ pages: [FanOutPage], pageSize: Int) async throws -> [FanOutProgress?] {
        guard !pages.isEmpty else { return [] }
        return try await transaction { session -> [FanOutProgress?] in
            // Every job's page is read, its lock taken, before any history lock: a batch takes its
            // jobs' locks in listing order and then the history locks all at once, so it never
            // holds a history lock while it waits for a job another batch holds.
            var read: [FanOutJobPage?] = []
            for page in pages { read.append(try await Self.readPage(page, pageSize: pageSize, session)) }
            try await Self.lockHistory(for: read.compactMap { $0 }, session)
            // The settings and devices of every page's recipients in one read, where a
            // transaction of one-user jobs (scheduled sends) read them a round trip per job.
            let recipients = try await Self.recipientsByID(session, userIDs: read.flatMap { $0?.readsRecipients ?? [] }.uniqued())
            var progress: [FanOutProgress?] = []
            var wrote = false
            for page in read {
                guard let page else {
                    progress.append(nil)
                    continue
                }
                let (after, written) = try await Self.writePage(page, recipients: page.recipients(from: recipients), session, modules: self.modules)
                progress.append(after)
                wrote = wrote || written
            }
            // Every process's idle workers look for what the pages queued (and sleep no longer
            // than until the first recipient given their own time is due): once a transaction.
            if wrote { try await session.notifyWork() }
            return progress
        }
    }

    /// The next page of one job, in the caller's transaction, which it holds the job's lock for.
    /// - Returns: nil for no job.
    private static func readPage(_ request: FanOutPage, pageSize: Int, _ session: PostgresSession) async throws -> FanOutJobPage? {
        let id = request.id
        // Processes working the same job take turns here; each reads the cursor the last left.
        // A batch locks its jobs in the order they were listed (oldest first, as every process
        // lists them), so two batches never wait for each other in a circle.
        guard let job = try await session.row("SELECT * FROM fanout_jobs WHERE notification_id = \(id.hex) FOR UPDATE") else { return nil }
        var page = try FanOutJobPage(request, job: job, pageSize: pageSize)
        guard !page.progress.done else { return page }
        let source = try FanOutRecipients(
            source: try job.text("source"), topic: try job.optionalText("topic_key"), audience: try job.optionalText("audience"))
        page.users = try await session.rows(source.page(after: page.cursor, limit: page.size)).map { try $0.text("user_id") }
        if !page.users.isEmpty, let notification = try await session.row("SELECT timestamp, distribution, type FROM notifications WHERE id = \(id.hex)") {
            try page.carry(notification, job: job)
        }
        return page
    }

    /// The history locks a batch's pages need, in one statement: every user's when one of them
    /// writes a whole page's history at once, else the routed pages' users, each.
    private static func lockHistory(for pages: [FanOutJobPage], _ session: PostgresSession) async throws {
        if pages.contains(where: \.writesAllHistory) {
            try await lockAllHistory(session)
        } else {
            let users = pages.flatMap(\.routedUsers)
            if !users.isEmpty { try await lockHistory(of: users, session) }
        }
    }

    /// Writes one page read by ``readPage(_:pageSize:_:)``, after ``lockHistory(for:_:)``.
    /// - Parameter recipients: the settings and devices of its ``FanOutJobPage/readsRecipients``.
    /// - Returns: the job's progress, and whether it queued work (deliveries, or recipients
    ///   waiting for their own time) that workers must be told of.
    private static func writePage(
        _ page: FanOutJobPage, recipients: [RecipientContext], _ session: PostgresSession, modules: StorageModules
    ) async throws -> (FanOutProgress, queued: Bool) {
        guard !page.progress.done else { return (page.progress, false) }
        let id = page.request.id
        let now = micros(Date())
        var queued = false
        if let localInstant = page.request.localInstant, !page.users.isEmpty {
            let (users, instants) = (recipients.map(\.userID), recipients.map { micros(localInstant($0)) })
            try await session.execute(
                """
                INSERT INTO scheduled_recipients (notification_id, user_id, due_at)
                SELECT \(id.hex), user_id, due_at FROM UNNEST(\(users)::text[], \(instants)::int8[]) AS r(user_id, due_at)
                ON CONFLICT DO NOTHING
                """
            )
            queued = true
        } else if let notification = page.notification {
            let route = page.request.route
            switch page.kind {
            case .route:
                try await insert(recipients.flatMap(route), of: id, session, at: notification.at, writingHistory: true, modules: modules)
            case .history, .historyAndDevices:
                _ = try await writeFanOutHistory(of: id, distribution: notification.distribution, for: .listed(page.users), session, at: notification.at)
                if page.kind == .historyAndDevices {
                    let withDevices = try await session.rows(
                        "SELECT DISTINCT user_id FROM devices WHERE user_id = ANY(\(page.users)::text[]) ORDER BY user_id"
                    ).map { try $0.text("user_id") }
                    try await insert(
                        try await Self.recipients(session, userIDs: withDevices).flatMap(route), of: id, session, at: notification.at, modules: modules)
                }
            }
            queued = true
        }
        try await session.execute(
            """
            UPDATE fanout_jobs SET cursor = \(page.users.last ?? page.cursor), written = written + \(page.users.count), updated_at = \(now),
                done_at = \(page.finishes ? now : nil) WHERE notification_id = \(id.hex)
            """
        )
        return (page.progressAfter, queued)
    }

    public func writeDueRecipients(
        limit: Int, route: @escaping @Sendable (FanOutJob, RecipientContext, Date) -> [PlannedDelivery]
    ) async throws -> Int {
        try await transaction { session -> Int in
            // Each process takes recipients no other holds; they stay taken until this commits
            // their rows, or return to the waiting if it fails.
            let due = try await session.rows(
                """
                DELETE FROM scheduled_recipients WHERE (notification_id, user_id) IN (
                    SELECT notification_id, user_id FROM scheduled_recipients WHERE due_at <= \(unescaped: Self.databaseNow)
                    ORDER BY due_at LIMIT \(max(limit, 1)) FOR UPDATE SKIP LOCKED
                ) RETURNING notification_id, user_id, due_at
                """
            ).map(DueRecipient.init)
            guard !due.isEmpty else { return 0 }
            // Their history rows are written as an accept's are, under their users' locks, all
            // taken at once.
            try await Self.lockHistory(of: due.map(\.user), session)
            for (notificationID, recipients) in Dictionary(grouping: due, by: \.notification) {
                guard let row = try await session.row("\(unescaped: FanOutJobSQL.jobColumns) WHERE j.notification_id = \(notificationID)") else { continue }
                let job = try FanOutJobSQL.pendingJob(row)
                let contexts = try await Self.recipients(session, userIDs: recipients.map(\.user))
                // Each recipient's rows are dated with their own instant.
                for (at, planned) in DueRecipient.planned(recipients, of: job, contexts: contexts, route: route) {
                    try await Self.insert(planned, of: job.notification.id, session, at: at, writingHistory: true, modules: self.modules)
                }
            }
            try await session.notifyWork()
            return due.count
        }
    }

    public func cancel(id: ObjectID, at date: Date) async throws -> Cancellation? {
        try await transaction { session -> Cancellation? in
            guard try await session.row("SELECT 1 AS found FROM notifications WHERE id = \(id.hex)") != nil else { return nil }
            let now = Self.micros(date)
            var recipients = 0
            // The job's row lock: a page being written commits first, or waits and finds the job
            // done. Recipients another process is routing now are its (their deliveries, once
            // committed, are cancelled below).
            if let job = try await session.row("SELECT recipients, written, done_at FROM fanout_jobs WHERE notification_id = \(id.hex) FOR UPDATE") {
                if try job.optionalInteger("done_at") == nil { recipients = max(try job.int("recipients") - job.int("written"), 0) }
                recipients += try await session.count("DELETE FROM scheduled_recipients WHERE notification_id = \(id.hex) RETURNING 1")
                if recipients > 0 {
                    try await session.execute(
                        """
                        UPDATE fanout_jobs SET done_at = COALESCE(done_at, \(now)), cancelled_at = \(now), cancelled_recipients = \(recipients),
                            updated_at = \(now) WHERE notification_id = \(id.hex)
                        """)
                }
            }
            var binds = PostgresBindings()
            binds.append(now)
            binds.append(id.hex)
            var notification = PostgresBindings()
            notification.append(id.hex)
            try await session.execute(PostgresQuery(unsafeSQL: FanOutJobSQL.cancelDigestItems, binds: notification))
            let cancelled = try await session.count(PostgresQuery(unsafeSQL: FanOutJobSQL.cancelDeliveries + " RETURNING 1", binds: binds))
            return Cancellation(deliveries: cancelled, recipients: recipients)
        }
    }

    /// A notification's fan-out progress, when it has a job.
    static func fanOutProgress(_ session: PostgresSession, of id: ObjectID) async throws -> FanOutProgress? {
        guard let row = try await session.row("\(unescaped: FanOutJobSQL.progressColumns) WHERE j.notification_id = \(id.hex)") else { return nil }
        return try FanOutJobSQL.progress(row)
    }
}
