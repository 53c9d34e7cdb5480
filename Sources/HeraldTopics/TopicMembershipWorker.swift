public import HeraldCore
public import Logging
public import ServiceLifecycle

/// Keeps each membership-keeping sink's provider-side topics equal to Herald's subscriptions:
/// reads the difference, hands it to the sink in batches, records the answers. A failed call is
/// retried with the delivery engine's backoff (and the provider's `Retry-After`); nothing is
/// lost across a crash, since the difference stays in storage until recorded.
public final class TopicMembershipWorker: Service {
    private let store: any TopicMembershipStore
    private let sinks: [(sink: any NotificationSink, scope: TopicMembershipScope)]
    private let retry: RetryPolicy
    private let interval: Duration
    private let logger: Logger
    private let signal = WakeSignal()
    /// Changes handed to a sink per call (FCM's batch API takes 1 000 tokens per topic).
    public static let batchSize = 1_000

    /// - Parameters:
    ///   - store: subscriptions, devices and the membership each sink is known to have.
    ///   - sinks: the sinks whose capabilities include topic membership.
    ///   - router: which devices each sink serves.
    ///   - retry: when a change the provider did not take is tried again.
    ///   - interval: how often to look for differences nobody woke the worker for (another
    ///     process's changes, devices removed by deliveries).
    ///   - logger: where refused and failed changes are reported.
    public init(
        store: any TopicMembershipStore, sinks: SinkRegistry, router: NotificationRouter, retry: RetryPolicy, interval: Duration = .seconds(60), logger: Logger
    ) {
        self.store = store
        self.sinks = sinks.sinks.filter { $0.capabilities.contains(.topicMembership) }.compactMap { sink in
            guard case .only(let providers) = sink.providers else { return nil }
            let unnamed = providers.contains { router.pushSink(provider: $0, app: nil)?.name == sink.name }
            return (sink, TopicMembershipScope(sink: sink.name, providers: providers.sorted(), servesUnnamedDevices: unnamed))
        }
        self.retry = retry
        self.interval = interval
        self.logger = logger
    }

    /// Whether any sink keeps topic membership (otherwise the worker has nothing to run).
    public var isNeeded: Bool { !sinks.isEmpty }

    /// Tells the worker that subscriptions, devices or subjects changed.
    public func wake() { signal.notify() }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                for (sink, scope) in self.sinks {
                    group.addTask { await self.keep(sink, scope) }
                }
            }
        }
    }

    private func keep(_ sink: any NotificationSink, _ scope: TopicMembershipScope) async {
        var failures = 0
        while !Task.isCancelled {
            var pause: Duration? = nil
            do {
                if try await reconcileOnce(sink, scope) {
                    failures = 0
                } else {
                    pause = interval
                }
            } catch _ where Task.isCancelled {
                break // ending, not a provider or storage failure
            } catch let error as RetryLater {
                failures += 1
                pause = min(max(error.after ?? .zero, retry.delay(afterAttempt: failures)), max(retry.maxDelay, .seconds(1)))
                logger.warning("topic membership for sink '\(scope.sink)' will be retried in \(pause ?? .zero): \(error.reason)")
            } catch {
                failures += 1
                pause = retry.delay(afterAttempt: failures)
                logger.warning("topic membership for sink '\(scope.sink)' failed, retrying: \(error)")
            }
            if let pause {
                if failures == 0 {
                    await signal.wait(timeout: pause)
                } else {
                    try? await Task.sleep(for: pause)
                }
            }
        }
    }

    struct RetryLater: Error {
        var after: Duration?
        var reason: String
    }

    /// One batch: read, send, record. - Returns: false when there was nothing to do.
    /// - Throws: ``RetryLater`` when the sink asked for some changes to be retried.
    @discardableResult
    func reconcileOnce(_ sink: any NotificationSink, _ scope: TopicMembershipScope) async throws -> Bool {
        let changes = try await store.pendingMembershipChanges(scope, limit: Self.batchSize)
        guard !changes.isEmpty else { return false }
        let outcomes = await sink.updateTopicMembership(changes)
        var settled: [(change: TopicMembershipChange, outcome: TopicMembershipOutcome)] = []
        var retryLater: RetryLater?
        for (index, change) in changes.enumerated() {
            var outcome = index < outcomes.count ? outcomes[index] : .retry(after: nil, reason: "the sink gave no outcome")
            switch outcome {
            case .applied: break
            case .refused(let reason): outcome = .refused(reason: FailureReason.storable(reason))
            case .retry(let after, let reason): outcome = .retry(after: after, reason: FailureReason.storable(reason))
            }
            if case .retry(let after, let reason) = outcome {
                retryLater = RetryLater(after: max(after ?? .zero, retryLater?.after ?? .zero), reason: reason)
            } else {
                settled.append((change, outcome))
            }
        }
        try await store.recordMembership(sink: scope.sink, settled)
        if let retryLater { throw retryLater }
        return true
    }

    /// Reconciles every sink until nothing differs (tests, tools). Stops at the first change to retry.
    public func drain() async throws {
        for (sink, scope) in sinks {
            while try await reconcileOnce(sink, scope) {}
        }
    }
}
