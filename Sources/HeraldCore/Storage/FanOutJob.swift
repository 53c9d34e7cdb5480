import Foundation

/// How a fan-out's recipients get their rows: the stored counterpart of ``FanOutPlan``, whose
/// closures cannot outlive the request that made them.
public enum FanOutKind: String, Sendable {
    /// ``FanOutPlan/route(_:)``: each recipient's deliveries come from the router.
    case route
    /// ``FanOutPlan/historyOnly``.
    case history
    /// ``FanOutPlan/historyAndDevices(_:)``: history for everyone, the router's Message Hub
    /// deliveries for recipients with devices.
    case historyAndDevices = "history_devices"

    /// The kind that stores `plan`.
    public init(_ plan: FanOutPlan) {
        switch plan {
        case .historyOnly: self = .history
        case .historyAndDevices: self = .historyAndDevices
        case .route: self = .route
        }
    }
}

/// How far a notification's fan-out has been written (docs/durability.md: a large fan-out is written after
/// the 202, from a cursor committed with it).
public struct FanOutProgress: Sendable, Equatable {
    /// Recipients counted when the notification was accepted.
    public var recipients: Int
    /// Recipients whose rows are committed so far.
    public var written: Int
    /// Whether every page is written.
    public var done: Bool
    /// For a scheduled send (`send_at`): the instant its pages are written from; nil for a
    /// fan-out written as soon as it is accepted.
    public var dueAt: Date?
    /// Whether the sender cancelled it (``done`` then too, with the rest never written).
    public var cancelled: Bool
    /// Whether each recipient gets their own instant (`send_at_local`): the pages written give
    /// them one, and they wait for it (``waiting``).
    public var local: Bool
    /// Recipients paged with their own instant (`send_at_local`) that has not come yet.
    public var waiting: Int
    /// Recipients who got nothing because the sender cancelled: those not yet paged and those
    /// still waiting for their own instant then.
    public var cancelledRecipients: Int

    /// Whether it is a scheduled send whose instant has not come at `now` (nothing written yet).
    public func isScheduled(at now: Date) -> Bool {
        !done && (dueAt.map { $0 > now } ?? false)
    }

    /// Recipients none of whose rows exist yet because their time has not come at `now`: a
    /// scheduled send's before its instant, a local-time send's not yet paged or waiting.
    public func scheduledRecipients(at now: Date) -> Int {
        let unwritten = done ? 0 : max(recipients - written, 0)
        return (isScheduled(at: now) || local ? unwritten : 0) + waiting
    }

    /// Progress as stored.
    public init(
        recipients: Int, written: Int, done: Bool, dueAt: Date? = nil, cancelled: Bool = false, local: Bool = false, waiting: Int = 0,
        cancelledRecipients: Int = 0
    ) {
        self.recipients = recipients
        self.written = written
        self.done = done
        self.dueAt = dueAt
        self.cancelled = cancelled
        self.local = local
        self.waiting = waiting
        self.cancelledRecipients = cancelledRecipients
    }
}

/// A fan-out too large to write in the accepting transaction: the notification is committed with
/// a cursor, and ``FanOutWorker`` writes its recipients page by page, each page with the
/// cursor's advance in one transaction, so a crash resumes where the last commit left off.
public struct FanOutJob: Sendable, Equatable {
    /// The notification whose recipients are written.
    public var notification: HeraldNotification
    /// How their rows are made.
    public var kind: FanOutKind
    /// How far the writing has got.
    public var progress: FanOutProgress
    /// Whether it is a Forced subject's message (critical on `push`).
    public var forcedSubject: Bool

    /// A job as stored.
    public init(notification: HeraldNotification, kind: FanOutKind, progress: FanOutProgress, forcedSubject: Bool = false) {
        self.notification = notification
        self.kind = kind
        self.progress = progress
        self.forcedSubject = forcedSubject
    }

    /// When its recipients are routed: a scheduled send's instant, else the accept's, so
    /// quiet hours and the rows' times are those of the moment the notification goes out.
    /// (A local-time send's recipients are each routed at their own instant.)
    public var routedAt: Date { progress.dueAt ?? notification.timestamp }
}

/// Whom a scheduled send (`send_at`) goes to, as its fan-out job pages them when it is due
/// (docs/timing.md).
public enum ScheduledRecipients: Sendable, Equatable {
    /// The users named (`user_ids`), each a recipient whether Herald knows them or not.
    case users([String])
    /// A topic's subscribers (every user Herald knows for a Forced subject).
    case topic(String, level: SubscriptionLevel)
    /// The users an audience names.
    case audience(Audience)
}

/// Fan-outs still being written, for ``FanOutWorker``.
public protocol FanOutJobStore: Sendable {
    /// Fan-outs not yet done and due, oldest first: up to `limit` written at once, and up to
    /// `limit` scheduled ones whose `send_at` has come (by the database's clock where it has
    /// one), so neither kind waits for the other's backlog.
    func pendingFanOuts(limit: Int) async throws -> [FanOutJob]
    /// How long until the next scheduled fan-out or recipient waiting for their own instant is
    /// due (zero when one is due already); nil when none is scheduled. The worker sleeps no
    /// longer than this.
    func untilNextScheduledFanOut() async throws -> Duration?
    /// Writes the next page of up to `pageSize` recipients of each of `pages` (their rows
    /// planned by its ``FanOutPage/route`` for ``FanOutKind/route`` and
    /// ``FanOutKind/historyAndDevices``) and advances each cursor, all in one transaction: many
    /// small jobs (a million sends scheduled for one user each) share one commit. Processes
    /// writing the same job take turns. The caller keeps a transaction's rows near `pageSize`
    /// in all (``FanOutWorker``).
    /// - Returns: each page's progress, in the order given; nil where there is no fan-out job.
    ///
    /// With ``FanOutPage/localInstant`` (a send in each recipient's own time,
    /// `send_at_local`), nothing is routed: each recipient of the page is stored waiting for the
    /// instant it gives them.
    func writeFanOutPages(_ pages: [FanOutPage], pageSize: Int) async throws -> [FanOutProgress?]
    /// Routes up to `limit` recipients whose own instant (`send_at_local`) has come (by the
    /// database's clock where it has one), earliest first, each with `route` at its instant,
    /// and writes their rows dated then, in one transaction that also removes them from the
    /// waiting. Processes claiming at once take different recipients.
    /// - Returns: how many recipients were routed.
    func writeDueRecipients(limit: Int, route: @escaping @Sendable (FanOutJob, RecipientContext, Date) -> [PlannedDelivery]) async throws -> Int
}

/// What cancelling a notification did (`DELETE /api/notifications/{id}`, docs/timing.md).
public struct Cancellation: Sendable, Equatable {
    /// Deliveries that had not gone out (waiting for a first attempt or a retry), now
    /// ``DeliveryState/cancelled``; one a worker holds is already going out and is not counted.
    public var deliveries: Int
    /// Recipients of a fan-out not yet written (a scheduled send before its instant, or a large
    /// fan-out still being written) who now get nothing.
    public var recipients: Int

    /// A cancellation's counts.
    public init(deliveries: Int, recipients: Int) {
        self.deliveries = deliveries
        self.recipients = recipients
    }

    /// Whether nothing was left to cancel: everything had gone out.
    public var isEmpty: Bool { deliveries == 0 && recipients == 0 }
}

/// The next page of one fan-out job to write (``FanOutJobStore/writeFanOutPages(_:pageSize:)``).
public struct FanOutPage: Sendable {
    /// The notification whose job it is.
    public var id: ObjectID
    /// Each recipient's deliveries.
    public var route: @Sendable (RecipientContext) -> [PlannedDelivery]
    /// For a send in each recipient's own time (`send_at_local`): the instant each recipient
    /// waits for, instead of being routed now.
    public var localInstant: (@Sendable (RecipientContext) -> Date)?

    /// A page of job `id`.
    public init(
        of id: ObjectID, route: @escaping @Sendable (RecipientContext) -> [PlannedDelivery], localInstant: (@Sendable (RecipientContext) -> Date)? = nil
    ) {
        self.id = id
        self.route = route
        self.localInstant = localInstant
    }
}

extension FanOutJobStore {
    /// Writes the next page of one fan-out (``writeFanOutPages(_:pageSize:)`` with one page).
    /// - Returns: the progress after the page; nil when `id` has no fan-out job.
    public func writeFanOutPage(
        of id: ObjectID, pageSize: Int, route: @escaping @Sendable (RecipientContext) -> [PlannedDelivery],
        localInstant: (@Sendable (RecipientContext) -> Date)? = nil
    ) async throws -> FanOutProgress? {
        try await writeFanOutPages([FanOutPage(of: id, route: route, localInstant: localInstant)], pageSize: pageSize).first ?? nil
    }
}
