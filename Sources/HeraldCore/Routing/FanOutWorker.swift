import Foundation
public import Logging
public import ServiceLifecycle
import Synchronization

/// Writes the recipients of fan-outs too large for the accepting transaction, and of scheduled
/// sends, about a page of rows per transaction (one job's page, or the pages of many small
/// jobs), so a million-subscriber message never holds the database's write lock for longer
/// than a page and accepts keep flowing beside it. Pages are planned with the router as
/// the accept would have planned them, at the notification's accept time; a scheduled send's
/// (`send_at`, docs/timing.md) from its instant, at that instant.
///
/// Any process may work any job: each page re-reads the cursor in its own transaction, so a job
/// left by a crashed process is resumed by the next poll without duplicate rows.
public final class FanOutWorker: Service {
    private let store: any FanOutJobStore
    private let router: NotificationRouter
    private let pageSize: Int
    private let interval: Duration
    private let logger: Logger
    private let onPage: @Sendable () -> Void
    private let signal = WakeSignal()

    /// - Parameters:
    ///   - store: where the jobs and their cursors are.
    ///   - router: plans each recipient's deliveries.
    ///   - pageSize: recipients written per transaction.
    ///   - interval: how often to look for jobs nobody woke the worker for (another process's,
    ///     or one a crash interrupted).
    ///   - logger: where paused and finished fan-outs are reported.
    ///   - onPage: called after each committed transaction of pages, typically ``DeliveryEngine/wake()``.
    public init(
        store: any FanOutJobStore, router: NotificationRouter, pageSize: Int = 1_000, interval: Duration = .seconds(5),
        logger: Logger = DeliveryEngine.silentLogger, onPage: @escaping @Sendable () -> Void = {}
    ) {
        self.store = store
        self.router = router
        self.pageSize = max(pageSize, 1)
        self.interval = interval
        self.logger = logger
        self.onPage = onPage
    }

    /// Tells the worker a fan-out job was committed.
    public func wake() { signal.notify() }

    public func run() async throws {
        // A page is one transaction: after a storage error nothing is half-written, the job
        // resumes from its cursor; a scheduled send is written from its instant, not at the next poll.
        await DueWorkLoop.run(
            interval: interval, signal: signal, logger: logger, paused: "fan-out paused after a storage error, resuming from the last committed page",
            work: { try await self.drain() }, untilDue: { try await self.store.untilNextScheduledFanOut() })
    }

    /// Writes every pending fan-out to the end, and routes every recipient whose own instant
    /// has come (tests, and `run`'s loop).
    public func drain() async throws {
        while try await writeRound() + writeDueRecipients() > 0 {}
    }

    /// Routes one page of recipients of local-time sends (`send_at_local`) whose instant has
    /// come, each at its instant. - Returns: how many were routed.
    func writeDueRecipients() async throws -> Int {
        guard !Task.isCancelled else { return 0 }
        let router = self.router
        let routed = try await store.writeDueRecipients(limit: pageSize) { job, recipient, instant in
            Self.route(job, router: router, at: instant)(recipient)
        }
        if routed > 0 { onPage() }
        return routed
    }

    /// Writes one page of each pending fan-out (up to ``jobsPerRound`` written at once and as
    /// many scheduled ones due, oldest first), so a million-recipient message does not hold back
    /// the fan-outs committed after it until its last page: a small one is done in a few rounds
    /// (each job used to be written to its end before the next).
    /// - Returns: how many fan-outs were pending.
    func writeRound() async throws -> Int {
        guard !Task.isCancelled else { return 0 }
        let jobs = try await store.pendingFanOuts(limit: Self.jobsPerRound)
        // Small jobs share a transaction, up to about a page of rows in all: a million sends
        // scheduled for one user each would otherwise be a million commits.
        var batch: [FanOutJob] = []
        var rows = 0
        for job in jobs {
            let expected = rowsOfNextPage(job)
            if !batch.isEmpty, rows > pageSize - expected || batch.count >= Self.jobsPerTransaction {
                try await writePages(of: batch)
                (batch, rows) = ([], 0)
            }
            batch.append(job)
            rows += expected
        }
        if !batch.isEmpty { try await writePages(of: batch) }
        return jobs.count
    }

    /// Jobs of each kind (written at once, scheduled and due) read per round.
    static let jobsPerRound = 256
    /// Small jobs' pages per transaction: enough to share a commit's fsync, few enough that an
    /// accept waiting for the write lock waits a few milliseconds, not the whole round.
    static let jobsPerTransaction = 32

    /// About how many recipients `job`'s next page writes: what is left of its count, at most a page.
    private func rowsOfNextPage(_ job: FanOutJob) -> Int {
        let (left, overflow) = job.progress.recipients.subtractingReportingOverflow(job.progress.written)
        return overflow ? pageSize : min(max(left, 1), pageSize)
    }

    private func writePages(of jobs: [FanOutJob]) async throws {
        let pages = jobs.map(page(of:))
        let progress = try await store.writeFanOutPages(pages, pageSize: pageSize)
        guard progress.contains(where: { $0 != nil }) else { return }
        onPage()
        for (job, progress) in zip(jobs, progress) {
            guard let progress, progress.done else { continue }
            // A fan-out of many pages is news; a million one-recipient scheduled sends are not.
            logger.log(
                level: progress.written > pageSize ? .info : .debug, "fan-out of \(job.notification.id) written: \(progress.written) recipients")
        }
    }

    private func page(of job: FanOutJob) -> FanOutPage {
        let notification = job.notification
        // A scheduled send is routed as it goes out: quiet hours then, settings as they are.
        let route = Self.route(job, router: router, at: job.routedAt)
        // A local-time send's page gives each recipient their instant in their zone, from the accept.
        let localInstant: (@Sendable (RecipientContext) -> Date)? = notification.sendAtLocal.map { local in
            let (defaultZone, acceptedAt) = (router.defaultTimeZone, notification.timestamp)
            // Everyone in one zone gets the same instant: worked out once per zone named, not
            // per recipient (a zone's rules are slow to load, a million recipients share 24).
            let instants = InstantsByZone()
            return { recipient in
                instants.instant(for: recipient.settings.timezone) {
                    local.instant(in: recipient.settings.timeZone(default: defaultZone), notBefore: acceptedAt)
                }
            }
        }
        return FanOutPage(of: notification.id, route: route, localInstant: localInstant)
    }

    /// How `job`'s recipients get their rows at `instant`: as the accept planned its inline
    /// pages, a Forced subject's subscribers as such.
    private static func route(_ job: FanOutJob, router: NotificationRouter, at instant: Date) -> @Sendable (RecipientContext) -> [PlannedDelivery] {
        let (notification, forced) = (job.notification, job.forcedSubject)
        return switch job.kind {
        case .route: { router.plan(notification, for: forced ? $0.subscribed(at: .forced) : $0, at: instant) }
        case .historyAndDevices: { router.messageHubDeliveries(notification, for: forced ? $0.subscribed(at: .forced) : $0, at: instant) }
        case .history: { _ in [] }
        }
    }
}

/// One page's instants of a send in each recipient's own time, by the zone the recipient named
/// (nil: the default).
private final class InstantsByZone: Sendable {
    private let known = Mutex<[String?: Date]>([:])

    func instant(for zone: String?, _ make: () -> Date) -> Date {
        if let instant = known.withLock({ $0[zone] }) { return instant }
        let instant = make()
        known.withLock { $0[zone] = instant }
        return instant
    }
}
