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

    /// The unfinished jobs with their notifications (`n.*`), oldest first; bind the limit.
    static let pendingColumns =
        "SELECT j.kind, j.source AS job_source, j.recipients AS job_recipients, j.written, n.* FROM fanout_jobs j JOIN notifications n ON n.id = j.notification_id WHERE j.done_at IS NULL ORDER BY j.created_at, j.notification_id"

    /// A row of ``pendingColumns``.
    static func pendingJob(_ row: some StoredRow) throws -> FanOutJob {
        FanOutJob(
            notification: try StoredRecords.notification(row), kind: try kind(row),
            progress: FanOutProgress(recipients: try row.int("job_recipients"), written: try row.int("written"), done: false),
            // Every user is a Forced subject's audience (``FanOutRecipients/everyone``).
            forcedSubject: try row.text("job_source") == "everyone")
    }

    static func kind(_ row: some StoredRow) throws -> FanOutKind {
        let text = try row.text("kind")
        guard let kind = FanOutKind(rawValue: text) else { throw HeraldError(.internal, code: "storage_corrupt", "fanout_jobs holds unknown kind '\(text)'") }
        return kind
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
