import Foundation
public import HeraldCore
public import Logging
public import ServiceLifecycle
import Synchronization

/// Keeps storage from growing forever: prunes devices not registered again for
/// `devices.stale_after`, and purges finished deliveries, idempotency keys, and (when
/// configured) history and the Message Hub archive past their retention, and what feature
/// modules keep (``ModulePurge``: the cards module's engagement events past `retention.events`).
/// Each purge runs in batches, each its own transaction, sized so that one holds the writer for
/// about `batchTarget` (2 ms), resting between them so that writes queued behind a batch
/// (accepts) go first and keep at least `1 - writerShare` of the writer.
/// A kind runs until nothing past its retention is left or its share of the pass
/// (`timePerKind`) is used; a kind cut short is behind (`herald_retention_behind`), and the
/// next pass starts at once instead of after the interval, so purging keeps up with writing
/// (docs/performance.md "Retention").
public struct StorageMaintenance: Service {
    /// A feature module's rows past their retention, purged each pass beside the core's.
    public struct ModulePurge: Sendable {
        /// The kind counted in the pass's result and log line.
        public var kind: String
        public var retention: Duration
        /// Removes at most `limit` rows older than the date. - Returns: how many it removed.
        public var purge: @Sendable (_ before: Date, _ limit: Int) async throws -> Int

        public init(kind: String, retention: Duration, purge: @escaping @Sendable (_ before: Date, _ limit: Int) async throws -> Int) {
            self.kind = kind
            self.retention = retention
            self.purge = purge
        }
    }

    public struct Policy: Sendable {
        public var staleDevicesAfter: Duration
        public var deliveries: Duration
        public var idempotency: Duration
        public var history: Duration?
        public var archive: Duration?
        /// Rows in a kind's first batch; later ones grow or shrink toward `batchTarget`.
        public var batchSize = 500
        /// The most rows one batch may take.
        public var maxBatchSize = 20_000
        /// How long one batch should hold the writer.
        public var batchTarget: Duration = .milliseconds(2)
        /// The share of the writer's time a purge may take while it is behind: after each batch
        /// it rests as long as the batch took (one half), so writes waiting behind it go first.
        public var writerShare = Self.defaultWriterShare
        /// `retention.purge_share` when a deployment sets none.
        public static let defaultWriterShare = 0.5
        /// How long one kind may purge in one pass before the others get their turn.
        public var timePerKind: Duration = .seconds(10)
        /// How many notifications still referred to a pass reads at most on its way through
        /// them (docs/durability.md, "Retention").
        public var notificationsExaminedPerPass = 20_000

        public init(staleDevicesAfter: Duration, deliveries: Duration, idempotency: Duration, history: Duration?, archive: Duration?) {
            self.staleDevicesAfter = staleDevicesAfter
            self.deliveries = deliveries
            self.idempotency = idempotency
            self.history = history
            self.archive = archive
        }
    }

    let store: any HeraldStorage
    let policy: Policy
    let interval: Duration
    let logger: Logger
    let metrics: HeraldMetrics
    let modulePurges: [ModulePurge]
    /// Where the notifications' purge goes on at the next pass.
    let notificationsCursor = NotificationsCursor()

    final class NotificationsCursor: Sendable {
        private let value = Mutex<String?>(nil)
        var position: String? {
            get { value.withLock { $0 } }
            set { value.withLock { $0 = newValue } }
        }
    }

    public init(
        store: any HeraldStorage, policy: Policy, modulePurges: [ModulePurge] = [], interval: Duration = .seconds(60), logger: Logger,
        metrics: HeraldMetrics
    ) {
        self.store = store
        self.modulePurges = modulePurges
        self.policy = policy
        self.interval = interval
        self.logger = logger
        self.metrics = metrics
    }

    public func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            var behind = false
            do {
                behind = try await pass().behind.isEmpty == false
            } catch _ where Task.isCancelled {
                break // ending, not a failure
            } catch {
                logger.warning("storage maintenance failed, trying again next pass: \(error)")
            }
            // Behind: go again after a breath, not a whole interval.
            let pause: Duration = behind ? .seconds(1) : interval
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
        }
    }

    /// What one pass did: rows removed per kind (only kinds with some), and the kinds it cut
    /// short with rows past their retention still there.
    public struct PassReport: Sendable {
        public var removed: [String: Int] = [:]
        public var behind: Set<String> = []
    }

    /// One pass over every kind. - Returns: rows removed per kind (only kinds with some).
    @discardableResult
    public func runOnce(now: Date = Date()) async throws -> [String: Int] {
        try await pass(now: now).removed
    }

    /// One pass over every kind.
    public func pass(now: Date = Date()) async throws -> PassReport {
        func cutoff(_ age: Duration) -> Date { now.addingTimeInterval(-age.seconds) }
        var report = PassReport()
        do {
            try await store.prepareAhead(now: now)
        } catch {
            // Rows past the prepared months still land somewhere (PostgreSQL's default
            // partition): the purges go on, and the next pass tries again.
            logger.warning("could not prepare storage ahead, trying again next pass: \(error)")
        }
        func purge(_ kind: String, _ body: (Int) async throws -> Int) async throws {
            let (count, cutShort) = try await batches { size in
                let removed = try await body(size)
                return (removed, removed >= size)
            }
            report.removed[kind, default: 0] += count
            if cutShort { report.behind.insert(kind) }
        }
        try await purge("devices") { try await store.pruneDevices(registeredBefore: cutoff(policy.staleDevicesAfter), limit: $0, at: now) }
        try await purge("deliveries") { try await store.purgeFinishedDeliveries(before: cutoff(policy.deliveries), limit: $0) }
        try await purge("idempotency_keys") { try await store.purgeIdempotencyKeys(before: cutoff(policy.idempotency), limit: $0) }
        if let history = policy.history {
            try await purge("history") { try await store.purgeHistory(before: cutoff(history), limit: $0) }
        }
        if let archive = policy.archive {
            try await purge("archive") { try await store.purgeArchive(before: cutoff(archive), limit: $0) }
        }
        for module in modulePurges {
            try await purge(module.kind) { try await module.purge(cutoff(module.retention), $0) }
        }
        // A notification goes once nothing refers to it: its deliveries and its history rows.
        // Where history outlives deliveries most past the cutoff are still referred to, so the
        // purge steps on from where the last step stopped (one sweep a pass at most) instead of
        // reading them all again; it is behind only when cut short among notifications to delete.
        var sweptFrom = notificationsCursor.position
        var dense = false
        var examined = 0
        let (notifications, cutShort) = try await batches { size in
            let step = try await store.purgeNotifications(before: cutoff(policy.deliveries), after: sweptFrom, limit: size)
            sweptFrom = step.last
            dense = step.deleted * 2 > size
            examined += size
            // Among notifications still referred to, a pass reads a bounded number and stops:
            // reading them is the cost, and they are read again only a sweep later.
            return (step.deleted, step.last != nil && (dense || examined < policy.notificationsExaminedPerPass))
        }
        notificationsCursor.position = sweptFrom
        report.removed["notifications", default: 0] += notifications
        if cutShort && dense { report.behind.insert("notifications") }
        for (kind, count) in report.removed { metrics.retention(kind: kind, purged: count, behind: report.behind.contains(kind)) }
        report.removed = report.removed.filter { $0.value > 0 }
        if let stale = report.removed["devices"] { metrics.devicesRemoved(reason: "stale", count: stale) }
        if !report.removed.isEmpty {
            let counts = report.removed.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
            let behind = report.behind.isEmpty ? "" : " (behind: \(report.behind.sorted().joined(separator: ", ")))"
            logger.info("storage maintenance purged \(counts)\(behind)")
        }
        return report
    }

    /// Runs `purge` in batches until one comes back short (nothing left), or the kind's share of
    /// the pass is used up (cut short). Each batch is sized from the last one's time, so a slow
    /// disk gets small batches and a fast one large.
    private func batches(_ purge: (Int) async throws -> (removed: Int, more: Bool)) async throws -> (removed: Int, cutShort: Bool) {
        let clock = ContinuousClock()
        let started = clock.now
        var size = max(1, policy.batchSize)
        var total = 0
        while true {
            let batchStarted = clock.now
            let (count, more) = try await purge(size)
            total += count
            if !more { return (total, false) }
            if Task.isShuttingDownGracefully || Task.isCancelled { return (total, true) }
            let now = clock.now
            if now - started >= policy.timePerKind { return (total, true) }
            let took = now - batchStarted
            if took * 2 < policy.batchTarget {
                size = min(size * 2, max(1, policy.maxBatchSize))
            } else if took > policy.batchTarget * 2 {
                // Not below a floor: a transaction's own cost (a commit's sync) does not shrink.
                size = max(size / 2, min(100, max(1, policy.batchSize)))
            }
            // Writers queued behind this batch (accepts) go before the next one, and get the
            // writer for the rest of the time.
            let rest = took * ((1 - policy.writerShare) / max(policy.writerShare, 0.01))
            if rest > .zero { try await Task.sleep(for: rest) } else { await Task.yield() }
        }
    }
}

extension HeraldConfiguration {
    /// The core's retention settings (`retention.*`, `devices.stale_after`) as a maintenance policy.
    public var storagePolicy: StorageMaintenance.Policy {
        var policy = StorageMaintenance.Policy(
            staleDevicesAfter: staleDevicesAfter, deliveries: deliveryRetention, idempotency: idempotencyRetention, history: historyRetention,
            archive: archiveRetention)
        policy.writerShare = purgeShare
        return policy
    }
}
