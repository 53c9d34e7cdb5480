import Foundation
import HeraldCore

/// Fan-outs written after their accept, the same on both engines: whom they page through, the
/// cursor (the last user id written) and the counts, removed with their notification.
enum FanOutJobSQL {
    static let table = """
        CREATE TABLE fanout_jobs (
            notification_id TEXT PRIMARY KEY REFERENCES notifications(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            source TEXT NOT NULL,
            topic_key TEXT,
            audience TEXT,
            cursor TEXT NOT NULL,
            recipients BIGINT NOT NULL,
            written BIGINT NOT NULL,
            created_at BIGINT NOT NULL,
            updated_at BIGINT NOT NULL,
            done_at BIGINT
        )
        """
    static let pendingIndex = "CREATE INDEX fanout_jobs_pending ON fanout_jobs(created_at) WHERE done_at IS NULL"

    /// A scheduled send's instant (docs/timing.md): NULL for a fan-out written at once.
    static let dueColumn = "ALTER TABLE fanout_jobs ADD COLUMN due_at BIGINT"
    /// A scheduled send's instant on its notification (a broadcast's `posted_at`).
    static let sendAtColumn = "ALTER TABLE notifications ADD COLUMN send_at BIGINT"
    /// When the sender cancelled the job (it is done then too).
    static let cancelledColumn = "ALTER TABLE fanout_jobs ADD COLUMN cancelled_at BIGINT"

    /// Bind the time and the notification id: its deliveries waiting for an attempt (none a
    /// worker holds), held for a count or folded into a digest, become `cancelled` (its digest
    /// items are deleted by the caller, ``cancelDigestItems``).
    static let cancelDeliveries = """
        UPDATE deliveries SET state = 'cancelled', next_attempt_at = NULL, updated_at = $1
        WHERE notification_id = $2 AND (state IN ('held', 'folded') OR (state = 'pending' AND leased = 0))
        """
    /// Bind the notification id: it leaves the digests it was folded into.
    static let cancelDigestItems = "DELETE FROM digest_items WHERE notification_id = $1"
    /// Sends in each recipient's own time (`send_at_local`, docs/timing.md): the wall-clock time
    /// on the notification; each recipient paged waits in `scheduled_recipients` for the instant
    /// it gave them, and leaves it when routed (or cancelled, counted on the job).
    static let localMigration = [
        "ALTER TABLE notifications ADD COLUMN send_at_local TEXT",
        """
        CREATE TABLE scheduled_recipients (
            notification_id TEXT NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
            user_id TEXT NOT NULL,
            due_at BIGINT NOT NULL,
            PRIMARY KEY (notification_id, user_id)
        )
        """,
        "CREATE INDEX scheduled_recipients_due ON scheduled_recipients(due_at)",
        "CREATE INDEX scheduled_recipients_user ON scheduled_recipients(user_id)",
        "ALTER TABLE fanout_jobs ADD COLUMN cancelled_recipients BIGINT NOT NULL DEFAULT 0",
        // Jobs cancelled before the column counted their unwritten recipients at read time.
        """
        UPDATE fanout_jobs SET cancelled_recipients = CASE WHEN recipients > written THEN recipients - written ELSE 0 END
        WHERE cancelled_at IS NOT NULL
        """,
    ]

    /// The next scheduled job, for the worker's sleep (replaced by ``pagingMigration``).
    static let dueIndex = "CREATE INDEX fanout_jobs_due ON fanout_jobs(due_at) WHERE done_at IS NULL AND due_at IS NOT NULL"

    /// Pending jobs found in index order however many there are: a million sends scheduled for
    /// tomorrow must not be walked past to find the one due now, nor a million due at one
    /// instant sorted again for each page (docs/performance.md "Scheduled sends at scale").
    static let pagingMigration = [
        "DROP INDEX fanout_jobs_pending",
        "DROP INDEX fanout_jobs_due",
        "CREATE INDEX fanout_jobs_immediate ON fanout_jobs(created_at, notification_id) WHERE done_at IS NULL AND due_at IS NULL",
        "CREATE INDEX fanout_jobs_due ON fanout_jobs(due_at, created_at, notification_id) WHERE done_at IS NULL AND due_at IS NOT NULL",
    ]

    /// Unfinished jobs with their notifications (`n.*`), oldest first: up to `limit` (an SQL
    /// expression) written at once, and up to `limit` scheduled ones due by `now` (an SQL
    /// expression: a bound parameter, or the database's clock), earliest instant first, so
    /// neither kind holds the other back. Each part reads its own index.
    static func pending(now: String, limit: String) -> String {
        """
        \(jobColumns) WHERE j.notification_id IN (
            SELECT notification_id FROM (
                SELECT notification_id FROM fanout_jobs WHERE done_at IS NULL AND due_at IS NULL ORDER BY created_at, notification_id LIMIT \(limit)
            ) immediate
            UNION ALL SELECT notification_id FROM (
                SELECT notification_id FROM fanout_jobs WHERE done_at IS NULL AND due_at IS NOT NULL AND due_at <= \(now)
                ORDER BY due_at, created_at, notification_id LIMIT \(limit)
            ) due
        ) ORDER BY j.created_at, j.notification_id
        """
    }

    /// Jobs with their notifications (`n.*`), read by ``pendingJob(_:)``; append the `WHERE`.
    static let jobColumns = """
        SELECT j.kind, j.source AS job_source, j.recipients AS job_recipients, j.written, j.due_at AS job_due_at, n.*
        FROM fanout_jobs j JOIN notifications n ON n.id = j.notification_id
        """

    /// Microseconds until the next scheduled job or waiting recipient (`until`), by `now` (as
    /// in ``pending(now:limit:)``); NULL for none.
    static func untilNextDue(now: String) -> String {
        """
        SELECT MIN(due) - \(now) AS until FROM (
            SELECT MIN(due_at) AS due FROM fanout_jobs WHERE done_at IS NULL AND due_at IS NOT NULL
            UNION ALL SELECT MIN(due_at) AS due FROM scheduled_recipients
        ) d
        """
    }

    /// A job's progress with its notification's `send_at_local` and its recipients waiting for
    /// their own instant; append `WHERE j.notification_id = …`.
    static let progressColumns = """
        SELECT j.recipients, j.written, j.done_at, j.due_at, j.cancelled_at, j.cancelled_recipients, n.send_at_local,
            (SELECT COUNT(*) FROM scheduled_recipients s WHERE s.notification_id = j.notification_id) AS waiting
        FROM fanout_jobs j JOIN notifications n ON n.id = j.notification_id
        """

    /// A row of ``progressColumns``.
    static func progress(_ row: some StoredRow) throws -> FanOutProgress {
        FanOutProgress(
            recipients: try row.int("recipients"), written: try row.int("written"), done: try row.optionalInteger("done_at") != nil,
            dueAt: try row.optionalDate("due_at"), cancelled: try row.optionalInteger("cancelled_at") != nil,
            local: try row.optionalText("send_at_local") != nil, waiting: try row.int("waiting"), cancelledRecipients: try row.int("cancelled_recipients"))
    }

    /// A row of ``jobColumns`` (its `done` aside: a pending job's is false).
    static func pendingJob(_ row: some StoredRow) throws -> FanOutJob {
        FanOutJob(
            notification: try StoredRecords.notification(row), kind: try kind(row),
            progress: FanOutProgress(
                recipients: try row.int("job_recipients"), written: try row.int("written"), done: false, dueAt: try row.optionalDate("job_due_at")),
            // Every user is a Forced subject's audience (``FanOutRecipients/everyone``).
            forcedSubject: try row.text("job_source") == "everyone")
    }

    static func kind(_ row: some StoredRow) throws -> FanOutKind {
        let text = try row.text("kind")
        guard let kind = FanOutKind(rawValue: text) else { throw HeraldError(.internal, code: "storage_corrupt", "fanout_jobs holds unknown kind '\(text)'") }
        return kind
    }
}

/// A recipient of a `send_at_local` send whose instant has come, as claimed from
/// `scheduled_recipients` on either engine.
struct DueRecipient {
    var notification: String
    var user: String
    /// Their instant, in microseconds: their rows are dated with it.
    var at: Int64

    init(_ row: some StoredRow) throws {
        notification = try row.text("notification_id")
        user = try row.text("user_id")
        at = try row.integer("due_at")
    }

    /// `due` (one notification's) planned with `route`, grouped by instant so each group's rows
    /// are written with its date; a recipient without a context (none read) gets none.
    static func planned(
        _ due: [DueRecipient], of job: FanOutJob, contexts: [RecipientContext], route: (FanOutJob, RecipientContext, Date) -> [PlannedDelivery]
    ) -> [(at: Int64, deliveries: [PlannedDelivery])] {
        let byUser = Dictionary(contexts.map { ($0.userID, $0) }, uniquingKeysWith: { first, _ in first })
        return Dictionary(grouping: due, by: \.at).map { at, group in
            let instant = Timestamp.date(microseconds: at)
            return (at, group.compactMap { byUser[$0.user] }.flatMap { route(job, $0, instant) })
        }
    }
}

/// Whom a fan-out pages through, in the form a ``FanOutJob``'s row keeps it (`source`,
/// `topic_key`, `audience`), so whichever process continues the job pages the same users.
enum FanOutRecipients: Sendable, Equatable {
    /// The subscribers of a topic that is not Forced.
    case subscribers(topic: String)
    /// Every user Herald knows (a Forced subject).
    case everyone
    /// The users an audience names.
    case audience(Audience)

    /// An audience of every known user and nobody named: each engine reads it as ``everyone``
    /// (tiers and groups add nobody; the union's de-duplication of a million users took the
    /// 202 over half a second). It stays an audience: ``everyone`` marks a Forced subject's job.
    var isEveryKnownUser: Bool {
        if case .audience(let audience) = self { audience.isEveryKnownUser } else { false }
    }

    /// The row's `source`, `topic_key` and `audience` columns.
    var stored: (source: String, topic: String?, audience: String?) {
        get throws {
            switch self {
            case .subscribers(let topic): ("subscribers", topic, nil)
            case .everyone: ("everyone", nil, nil)
            case .audience(let audience): ("audience", nil, try StoredJSON.encode(audience))
            }
        }
    }

    /// Whom a scheduled send pages through: users named are an audience of them alone.
    init(_ scheduled: ScheduledRecipients) {
        switch scheduled {
        case .users(let ids): self = .audience(Audience(userIDs: ids))
        case .topic(let key, let level): self = level == .forced ? .everyone : .subscribers(topic: key)
        case .audience(let audience): self = .audience(audience)
        }
    }

    init(source: String, topic: String?, audience: String?) throws {
        switch source {
        case "subscribers":
            guard let topic else { throw Self.corrupt("a subscribers job without a topic") }
            self = .subscribers(topic: topic)
        case "everyone":
            self = .everyone
        case "audience":
            guard let audience = try StoredJSON.decode(Audience.self, from: audience) else {
                throw Self.corrupt("an audience job without an audience")
            }
            self = .audience(audience)
        default:
            throw Self.corrupt("unknown source '\(source)'")
        }
    }

    private static func corrupt(_ problem: String) -> HeraldError {
        HeraldError(.internal, code: "storage_corrupt", "fanout_jobs holds \(problem)")
    }
}
