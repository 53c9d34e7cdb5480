public import Foundation
public import Logging
public import ServiceLifecycle
import Synchronization

/// How the delivery engine works its queue.
public struct DeliveryEngineConfiguration: Sendable, Equatable {
    /// Concurrent claim-and-deliver loops.
    public var workers: Int = 2
    /// Deliveries claimed at once by one worker.
    public var batchSize: Int = 256
    /// How long a worker waits for the slowest sink of its batch before it takes the next one.
    /// The sink goes on with its deliveries (their leases kept, their outcomes recorded when it
    /// answers), so one slow sink, or one slow endpoint inside a sink, does not hold back the
    /// others' deliveries.
    public var batchPatience: Duration = .seconds(1)
    /// The most deliveries one sink is given at once, however many batches its answers lag
    /// behind; past it, none of its deliveries is claimed until it answers. By default all
    /// workers' batches, the most a sink could have when workers waited for every sink.
    public var sinkInFlightLimit: Int?
    /// How long a claim is held; a worker that dies without recording leaves it to expire.
    public var lease: Duration = .seconds(60)
    /// The longest an idle worker waits before looking for due retries.
    public var idlePoll: Duration = .seconds(1)
    /// When failed deliveries are tried again, and how many times (`delivery.retry`).
    public var retry: RetryPolicy = RetryPolicy()
    /// The longest a sink's retry-after (a provider's `Retry-After`) may postpone a delivery;
    /// a longer one is capped, so one odd answer cannot park work for years.
    public var maxRetryAfter: Duration = .seconds(3600)
    /// When a failing sink's circuit opens, and how it is probed.
    public var circuit = CircuitConfiguration()

    /// The defaults `delivery:` starts from.
    public init() {}
}

/// Claims due deliveries, hands them to their sinks in batches, and records the outcomes with
/// retries (exponential backoff and jitter, the sink's retry-after honoured) until a delivery is
/// delivered, failed, or dead after `retry.maxAttempts`.
public final class DeliveryEngine: Service {
    let queue: any DeliveryQueue
    private let sinks: SinkRegistry
    let configuration: DeliveryEngineConfiguration
    let logger: Logger
    let clock: @Sendable () -> Date
    let metrics: HeraldMetrics
    let signal = WakeSignal()
    /// Each sink's circuit: open when almost nothing gets through, probed, closed by a round
    /// of probes that does.
    public let circuits: CircuitBreakers
    /// Each sink's outcomes per minute over the last hour, and its circuit's changes.
    public let timeline = DeliveryTimeline()
    /// Deliveries leased to this engine by the accepts that stored them (no claim needed).
    public let handOff: DeliveryHandOff
    /// Deliveries each sink has in hand, for batches whose workers moved on without them.
    let workload: SinkWorkload
    /// Modules' say on each due delivery before its sink is handed it, in order.
    let dueHooks: [any DueHook]
    /// Where badge-carrying sinks' counts come from, when a module keeps them.
    let badgeCounts: (any BadgeCounts)?

    /// An engine over `queue` delivering through `sinks`; it claims nothing until ``run()``.
    /// `dueHooks` see each sink's due deliveries in order before the sink does; `badgeCounts`,
    /// when given, fills ``Delivery/badge`` for sinks that carry one; `clock` is for tests.
    public init(
        queue: any DeliveryQueue, sinks: SinkRegistry, configuration: DeliveryEngineConfiguration = .init(),
        logger: Logger = DeliveryEngine.silentLogger, metrics: HeraldMetrics = HeraldMetrics(), dueHooks: [any DueHook] = [],
        badgeCounts: (any BadgeCounts)? = nil, clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.metrics = metrics
        self.dueHooks = dueHooks
        self.badgeCounts = badgeCounts
        self.queue = queue
        self.sinks = sinks
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
        let circuits = CircuitBreakers(configuration: configuration.circuit)
        self.circuits = circuits
        let allBatches = max(1, configuration.workers).multipliedReportingOverflow(by: max(1, configuration.batchSize))
        let workload = SinkWorkload(limit: configuration.sinkInFlightLimit ?? (allBatches.overflow ? Int.max : allBatches.partialValue))
        self.workload = workload
        // A batch in hand per worker and one more waiting for each.
        self.handOff = DeliveryHandOff(
            capacity: 2 * max(1, configuration.workers) * max(1, configuration.batchSize), lease: configuration.lease,
            admits: { !circuits.isOpen($0) && !workload.isFull($0) }
        )
    }

    /// The default: an embedder that wants a line per delivery outcome passes its own logger
    /// (`herald serve` does); tests and tools stay quiet.
    public static let silentLogger = Logger(label: "herald.delivery", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Tells idle workers that new deliveries were committed.
    public func wake() { signal.notify() }

    /// Workers idle until a wake or their poll (for tests, which must know the engine is idle
    /// rather than guess it from elapsed time).
    var idleWorkers: Int { signal.waiting }

    public func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<max(1, configuration.workers) {
                group.addTask { await self.workerLoop(worker) }
            }
            group.addTask { await self.relayStorageNotices() }
            group.addTask(priority: .high) { await self.keepHandedOffLeases() }
        }
        await giveBackHandedOff()
    }

    /// Extends the leases of handed-off deliveries that wait for a worker, so a queue held up
    /// by a slow sink is not claimed (and sent) again elsewhere; until shutdown.
    private func keepHandedOffLeases() async {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            _ = try? await cancelWhenGracefulShutdown { try await self.beatOnce(of: "handed-off") { self.handOff.queuedLeases } }
        }
    }

    /// At shutdown: handed-off deliveries no worker took are made due again at once, so the
    /// next process sends them without waiting for their leases to run out. Their attempt stays
    /// counted, as for a claimed batch cut short.
    private func giveBackHandedOff() async {
        let left = handOff.close()
        guard !left.isEmpty else { return }
        let now = clock()
        let updates = left.map {
            DeliveryUpdate(id: $0.id, state: .pending, attempts: $0.attempt, lastError: "handed back at shutdown before it was sent", nextAttemptAt: now)
        }
        do {
            // Unstructured: the engine may be ending because its task was cancelled.
            let queue = self.queue
            try await Task { try await queue.record(updates, at: now) }.value
        } catch {
            logger.warning("could not hand back \(left.count) deliveries at shutdown; they are due again when their leases run out: \(error)")
        }
    }

    /// Claims and sends batches until shutdown. A sink still sending when the batch's patience
    /// runs out goes on in this worker's task group (which waits for it before the worker
    /// ends) while the worker takes the next batch.
    private func workerLoop(_ worker: Int) async {
        await withDiscardingTaskGroup { group in
            var failures = 0
            var lastClaim = ContinuousClock.now - configuration.idlePoll
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
                do {
                    // Handed-off deliveries first; the queue is claimed too when they run out, and
                    // at least every tenth of the idle poll, so retries that fall due are not held
                    // back by a steady stream of accepts.
                    let handed = handOff.take(max: configuration.batchSize, skipping: workload.full)
                    let claims = handed.isEmpty || ContinuousClock.now - lastClaim >= configuration.idlePoll / 10
                    if claims { lastClaim = .now }
                    let batch = try await claimBatch(handedOff: handed, claims: claims)
                    failures = 0
                    guard !batch.isEmpty else {
                        await idle()
                        continue
                    }
                    let (progress, bySink) = start(batch)
                    for (name, deliveries) in bySink {
                        group.addTask {
                            do {
                                try await self.send(deliveries, through: name, of: progress)
                            } catch {
                                // Tried for as long as their leases last (``record(_:of:)``):
                                // they are sent again once claimed, after their leases ran out.
                                self.logger.error("delivery worker \(worker) could not record what sink '\(name)' answered: \(error)")
                            }
                        }
                    }
                    await progress.wait(patience: configuration.batchPatience)
                } catch _ where Task.isCancelled {
                    // The process is ending (a server that could not start cancels its services):
                    // not a storage failure, and nothing to report.
                    break
                } catch {
                    // Storage is unavailable: leased work stays safe in the queue; back off and retry,
                    // never longer than a second, so delivery resumes soon after storage returns.
                    failures += 1
                    logger.error("delivery worker \(worker) could not reach storage: \(error)")
                    let pause = StorageBackoff.pause(after: failures, cap: .seconds(1))
                    try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
                }
            }
        }
    }

    /// Sinks none of whose deliveries a worker takes now: those whose circuit is open, and
    /// those given as many as they may have at once.
    private func heldSinks() -> Set<String> {
        circuits.openSinks().union(workload.full)
    }

    private func idle() async {
        var timeout = configuration.idlePoll
        // Deliveries of open circuits and full sinks are not due for this worker (a full sink's
        // answer wakes it); an open circuit's probe is.
        let due = [try? await queue.nextDueDate(sinks: .excluding(heldSinks())), circuits.nextProbe()].compactMap { $0 }.min()
        if let due {
            timeout = min(timeout, .saturating(seconds: max(due.timeIntervalSince(clock()), 0.001)))
        }
        let signal = self.signal
        let limit = timeout
        await withGracefulShutdownHandler {
            await signal.wait(timeout: limit)
        } onGracefulShutdown: {
            signal.notify()
        }
    }

    /// Claims one batch of due deliveries, delivers it and records the outcomes, waiting for
    /// every sink however slow.
    /// - Returns: how many deliveries were worked.
    @discardableResult
    public func processDue() async throws -> Int {
        let batch = try await claimBatch(handedOff: handOff.take(max: configuration.batchSize, skipping: workload.full), claims: true)
        guard !batch.isEmpty else { return 0 }
        let (progress, bySink) = start(batch)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (name, deliveries) in bySink {
                group.addTask { try await self.send(deliveries, through: name, of: progress) }
            }
            try await group.waitForAll()
        }
        return batch.count
    }

    /// `handedOff` with, when `claims`, the due deliveries claimed from the queue.
    private func claimBatch(handedOff: [Delivery], claims: Bool) async throws -> [Delivery] {
        let now = clock()
        var batch = handedOff
        // A handed-off lease runs from the accept, and this batch's heartbeat first beats a third
        // of a lease from now: one that waited longer than that (the engine busy, or just
        // started) is extended first, or it could run out before that beat.
        if let oldest = handedOff.map(\.notification.timestamp).min(), now.timeIntervalSince(oldest) > configuration.lease.seconds / 3 {
            await extend(handedOff.map { DeliveryLease(id: $0.id, attempt: $0.attempt) }, of: "handed off")
        }
        if claims {
            // A sink whose circuit is open gets a round of probe deliveries when its probes are
            // due; the rest of its deliveries stay pending, untouched.
            do {
                let limit = configuration.batchSize - batch.count
                if limit > 0 {
                    batch += try await queue.claimDue(now: now, limit: limit, lease: configuration.lease, sinks: .excluding(heldSinks()))
                }
                for sink in circuits.probesDue(at: now) {
                    do {
                        let probe = try await queue.claimDue(now: now, limit: circuits.probeBatch, lease: configuration.lease, sinks: .only(sink))
                        circuits.probesClaimed(sink, count: probe.count)
                        batch += probe
                    } catch {
                        // No probe went out: the next round is due at once, not never.
                        circuits.probesClaimed(sink, count: 0)
                        throw error
                    }
                }
            } catch {
                // Handed-off deliveries are leased to this worker already: send them anyway.
                guard !handedOff.isEmpty else { throw error }
                logger.error("could not claim due deliveries: \(error)")
            }
        }
        return batch
    }

    /// Splits `batch` by sink, counts it in the sinks' workload and starts its heartbeat.
    private func start(_ batch: [Delivery]) -> (BatchProgress, [String: [Delivery]]) {
        var bySink: [String: [Delivery]] = [:]
        for delivery in batch { bySink[delivery.sink, default: []].append(delivery) }
        for (name, deliveries) in bySink where workload.start(deliveries.count, for: name) {
            logger.warning(
                "sink '\(name)' has \(workload.limit) deliveries in progress, its limit; no more are given to it until it answers (a slow receiver or provider)"
            )
        }
        let progress = BatchProgress(batch, sinks: bySink.count)
        // While a sink is still working, its leases are extended, so a batch slower than the
        // lease is not claimed (and sent) again by another worker. At the priority of the
        // store's group committer, so a commit-heavy load cannot hold a heartbeat back past
        // the lease.
        progress.keep(Task(priority: .high) { await self.keepLeases(progress.leases) })
        return (progress, bySink)
    }

    /// Sends one sink's part of a batch and records its outcomes as the sink reports them: all
    /// when it answers, so a slow webhook does not hold back history rows or pushes that were
    /// already sent, or as they come (``NotificationSink/deliver(_:reporting:)``), so a slow
    /// send does not hold back the rest of its own sink's part either.
    private func send(_ deliveries: [Delivery], through name: String, of progress: BatchProgress) async throws {
        let share = WorkloadShare(deliveries.count)
        defer {
            progress.sinkFinished()
            // Whatever was not settled (storage failed) no longer counts either: its lease runs out.
            release(share.releaseRest(), of: name)
        }
        guard let sink = sinks[name] else {
            try await settle(deliveries, as: .retry(after: nil, reason: "sink '\(name)' is not configured"), of: name, progress, share)
            return
        }
        let now = clock()
        let (refused, due) = screen(deliveries, for: sink, now: now)
        // Modules hold or drop what they own (a snooze, a cap) before any circuit sees it.
        let (decided, admitted) = await consultDueHooks(due, now: now)
        // An endpoint whose circuit is open holds its deliveries; the sink's other endpoints go on.
        let (held, open) = admit(admitted, to: sink, now: now)
        let live = await withBadges(open, for: sink)
        let screened = refused + decided + held
        let reports = SinkReports(count: live.count)
        if !screened.isEmpty {
            do {
                try await settle(screened.map(\.0), screened.map(\.1), of: name, progress, share)
            } catch {
                reports.failed(error)
            }
        }
        if !live.isEmpty {
            await sink.deliver(
                live,
                reporting: DeliveryReporter { outcomes in
                    let taken = reports.take(outcomes)
                    guard !taken.isEmpty else { return }
                    // Retry-After and backoff count from the provider's answer, not from the send.
                    let answered = self.clock()
                    let delivered = taken.map { live[$0.index] }
                    // Judged by the circuit as it was: a failure answered while it was already
                    // open (a probe's, or one sent before it opened) gives its attempt back.
                    let updates = zip(delivered, taken).map { self.update(for: $0, outcome: $1.outcome, in: sink, now: answered) }
                    self.observeCircuit(of: sink, named: name, delivered, taken.map(\.outcome), at: answered)
                    do {
                        try await self.settle(delivered, updates, of: name, progress, share)
                    } catch {
                        reports.failed(error)
                    }
                })
        }
        let missing = reports.missing.map { live[$0] }
        if !missing.isEmpty {
            logger.error("sink '\(name)' gave no outcome for \(missing.count) of \(live.count) deliveries; retrying them")
            try await settle(missing, as: .retry(after: nil, reason: "sink '\(name)' gave no outcome for it"), of: name, progress, share)
        }
        if let error = reports.error { throw error }
    }

    /// ``settle(_:_:of:_:_:)`` with one outcome for every one of `deliveries`.
    private func settle(_ deliveries: [Delivery], as outcome: DeliveryOutcome, of name: String, _ progress: BatchProgress, _ share: WorkloadShare) async throws
    {
        let now = clock()
        try await settle(deliveries, deliveries.map { update(for: $0, outcome: outcome, now: now) }, of: name, progress, share)
    }

    /// Records `updates`, one for each of `deliveries` in order: their leases are no longer
    /// kept, and (recorded or not) they no longer count in their sink's workload.
    private func settle(
        _ deliveries: [Delivery], _ updates: [DeliveryUpdate], of name: String, _ progress: BatchProgress, _ share: WorkloadShare
    ) async throws {
        progress.leases.finish(deliveries)
        defer { release(share.release(deliveries.count), of: name) }
        try await record(updates, of: deliveries)
    }

    /// `count` deliveries of the sink no longer count in its workload; a sink that was full
    /// takes deliveries again, and idle workers look for them.
    private func release(_ count: Int, of name: String) {
        if count > 0, workload.finish(count, for: name) { signal.notify() }
    }

    /// Extends the outstanding leases every third of the lease until cancelled or none is left.
    private func keepLeases(_ outstanding: OutstandingLeases) async {
        while !Task.isCancelled, (try? await beatOnce(of: "in progress", { outstanding.current })) == true {}
    }

    /// Waits a third of the lease, then extends `leases()` by a lease.
    /// - Returns: false when there were none to extend.
    private func beatOnce(of what: String, _ leases: () -> [DeliveryLease]) async throws -> Bool {
        try await Task.sleep(for: max(configuration.lease / 3, .milliseconds(50)))
        let leases = leases()
        guard !Task.isCancelled, !leases.isEmpty else { return false }
        await extend(leases, of: what)
        return true
    }

    /// Extends `leases` by a lease from now; a failure is logged (the next beat tries again).
    private func extend(_ leases: [DeliveryLease], of what: String) async {
        do {
            try await queue.extendLeases(leases, until: clock().addingTimeInterval(configuration.lease.seconds))
        } catch {
            logger.warning("could not extend the leases of \(leases.count) deliveries \(what): \(error)")
        }
    }

    /// Works the queue until nothing is due now. For tests and one-shot tools.
    public func drain() async throws {
        while try await processDue() > 0 {}
    }
}
