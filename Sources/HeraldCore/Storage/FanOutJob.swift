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

    /// Progress as stored.
    public init(recipients: Int, written: Int, done: Bool) {
        self.recipients = recipients
        self.written = written
        self.done = done
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
}

/// Fan-outs still being written, for ``FanOutWorker``.
public protocol FanOutJobStore: Sendable {
    /// Fan-outs not yet done, oldest first.
    func pendingFanOuts(limit: Int) async throws -> [FanOutJob]
    /// Writes the next page of up to `pageSize` recipients of notification `id` (their rows
    /// planned by `route` for ``FanOutKind/route`` and ``FanOutKind/historyAndDevices``) and
    /// advances the cursor, in one transaction. Processes writing the same job take turns.
    /// - Returns: the progress after the page; nil when `id` has no fan-out job.
    func writeFanOutPage(
        of id: ObjectID, pageSize: Int, route: @escaping @Sendable (RecipientContext) -> [PlannedDelivery]
    ) async throws
        -> FanOutProgress?
}
