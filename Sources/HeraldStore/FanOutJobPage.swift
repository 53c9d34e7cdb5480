import HeraldCore

/// One fan-out job's next page as a transaction of pages reads it, before any of them is
/// written: both engines read every job's page first, then what the pages need all at once (the
/// recipients of them all, and on PostgreSQL the history locks), then write each.
struct FanOutJobPage {
    var request: FanOutPage
    var kind: FanOutKind
    /// The job's progress before this page; `done` when it had finished already.
    var progress: FanOutProgress
    var cursor: String
    var size: Int
    /// The recipients this page writes, in user-id order.
    var users: [String] = []
    /// Its notification's distribution and type, and the time its rows carry: the accept's,
    /// a scheduled send's instant. Nil for a notification gone since.
    var notification: (distribution: String, type: String, at: Int64)?

    /// The page after `job`'s cursor, its users not read yet.
    init(_ request: FanOutPage, job: some StoredRow, pageSize: Int) throws {
        self.request = request
        kind = try FanOutJobSQL.kind(job)
        progress = FanOutProgress(recipients: try job.int("recipients"), written: try job.int("written"), done: try job.optionalInteger("done_at") != nil)
        cursor = try job.text("cursor")
        size = max(pageSize, 1)
    }

    /// Takes what its rows need from the notification's row.
    mutating func carry(_ notification: some StoredRow, job: some StoredRow) throws {
        // Rows carry the accept's time, as the accepting transaction would have written them (a
        // scheduled send's: its instant).
        self.notification = (
            try notification.text("distribution"), try notification.text("type"), try job.optionalInteger("due_at") ?? notification.integer("timestamp")
        )
    }

    /// Whether it writes history rows for every user of the page at once (a Message Hub
    /// message's kinds), rather than as it routes each.
    var writesAllHistory: Bool { !progress.done && !users.isEmpty && request.localInstant == nil && kind != .route }
    /// The users it routes now, writing their history rows as an accept does.
    var routedUsers: [String] { !progress.done && request.localInstant == nil && kind == .route ? users : [] }
    /// The users whose settings and devices it reads: those it routes, and those it gives an
    /// instant in their own zone.
    var readsRecipients: [String] { progress.done || (request.localInstant == nil && kind != .route) ? [] : users }
    /// The settings and devices of its ``readsRecipients``, from those read for a whole
    /// transaction of pages (a user without a row has the defaults and no device).
    func recipients(from read: [String: RecipientContext]) -> [RecipientContext] {
        readsRecipients.map { read[$0] ?? RecipientContext(userID: $0) }
    }
    /// Whether it is the job's last.
    var finishes: Bool { users.count < size }
    /// The job's progress once it is written.
    var progressAfter: FanOutProgress {
        progress.done ? progress : FanOutProgress(recipients: progress.recipients, written: progress.written.saturatingAdd(users.count), done: finishes)
    }
}
