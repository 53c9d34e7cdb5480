import Foundation
public import HeraldCore
public import Logging
public import ServiceLifecycle

/// Keeps storage from growing forever: prunes devices not registered again for
/// `devices.stale_after`, and purges finished deliveries, idempotency keys, and (when
/// configured) history and the Message Hub archive past their retention, and what feature
/// modules keep (``ModulePurge``: the cards module's engagement events past `retention.events`).
/// Each purge runs in small batches, each its own transaction, so it never holds the write lock
/// for long.
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
        /// Rows per batch, and batches per kind per pass.
        public var batchSize = 500
        public var batchesPerPass = 20

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
            do {
                try await runOnce()
            } catch _ where Task.isCancelled {
                break // ending, not a failure
            } catch {
                logger.warning("storage maintenance failed, trying again next pass: \(error)")
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
        }
    }

    /// One pass over every kind. - Returns: rows removed per kind (only kinds with some).
    @discardableResult
    public func runOnce(now: Date = Date()) async throws -> [String: Int] {
        func cutoff(_ age: Duration) -> Date { now.addingTimeInterval(-age.seconds) }
        var removed: [String: Int] = [:]
        removed["devices"] = try await batches { try await store.pruneDevices(registeredBefore: cutoff(policy.staleDevicesAfter), limit: $0, at: now) }
        removed["deliveries"] = try await batches { try await store.purgeFinishedDeliveries(before: cutoff(policy.deliveries), limit: $0) }
        removed["idempotency_keys"] = try await batches { try await store.purgeIdempotencyKeys(before: cutoff(policy.idempotency), limit: $0) }
        if let history = policy.history {
            removed["history"] = try await batches { try await store.purgeHistory(before: cutoff(history), limit: $0) }
        }
        if let archive = policy.archive {
            removed["archive"] = try await batches { try await store.purgeArchive(before: cutoff(archive), limit: $0) }
        }
        for module in modulePurges {
            removed[module.kind, default: 0] += try await batches { try await module.purge(cutoff(module.retention), $0) }
        }
        // A notification goes once nothing refers to it: its deliveries and its history rows.
        removed["notifications"] = try await batches { try await store.purgeNotifications(before: cutoff(policy.deliveries), limit: $0) }
        removed = removed.filter { $0.value > 0 }
        if let stale = removed["devices"] { metrics.devicesRemoved(reason: "stale", count: stale) }
        if !removed.isEmpty {
            logger.info("storage maintenance purged \(removed.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", "))")
        }
        return removed
    }

    /// Runs `purge` in batches until one comes back short, or the pass's share is used up.
    private func batches(_ purge: (Int) async throws -> Int) async throws -> Int {
        var total = 0
        for _ in 0..<policy.batchesPerPass {
            let count = try await purge(policy.batchSize)
            total += count
            if count < policy.batchSize || Task.isShuttingDownGracefully { break }
        }
        return total
    }
}
