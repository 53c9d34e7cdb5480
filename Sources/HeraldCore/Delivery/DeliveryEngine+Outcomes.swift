import Foundation
import Logging
import ServiceLifecycle

/// What a sink's answers become: the update stored for each delivery (delivered, failed, retried
/// with backoff, dead), the log line, metrics and circuit state for each, and the record itself.
extension DeliveryEngine {
    /// Records `updates`, one for each of `deliveries` in order. Storage that fails is tried
    /// again (100 ms, doubling to a second) for up to a lease: an outcome given up is a push
    /// sent twice, once its lease runs out and another worker claims it. A record late past
    /// the lease is harmless: it is fenced by the attempt, so a newer claim's outcome stands.
    func record(_ updates: [DeliveryUpdate], of deliveries: [Delivery]) async throws {
        let now = clock()
        for (update, delivery) in zip(updates, deliveries) { observe(update, of: delivery, at: now) }
        // Not cancellable: when shutdown cuts a batch short, the outcomes it has (sends that
        // were answered, retries for those that were not) are still written.
        let (queue, logger, patience) = (self.queue, self.logger, configuration.lease)
        try await Task {
            let deadline = ContinuousClock.now + patience
            var failures = 0
            while true {
                do {
                    return try await queue.record(updates, at: now)
                } catch {
                    let pause = StorageBackoff.pause(after: failures, cap: .seconds(1))
                    failures += 1
                    // At shutdown the process is leaving: one try, as before.
                    guard ContinuousClock.now + pause < deadline, !Task.isShuttingDownGracefully else { throw error }
                    logger.warning("could not record the outcomes of \(updates.count) deliveries; trying again in \(pause): \(error)")
                    try? await Task.sleep(for: pause)
                }
            }
        }.value
    }

    /// Deliveries the sink is not handed, with their updates (too many attempts, no device any
    /// more, expired), and the ones it is.
    func screen(_ deliveries: [Delivery], for sink: any NotificationSink, now: Date) -> ([(Delivery, DeliveryUpdate)], [Delivery]) {
        var screened: [(Delivery, DeliveryUpdate)] = []
        var live: [Delivery] = []
        for delivery in deliveries {
            if delivery.attempt > configuration.retry.maxAttempts {
                // Claimed that often without an outcome: its worker keeps dying on it.
                screened.append(
                    (
                        delivery,
                        DeliveryUpdate(
                            id: delivery.id, state: .dead, attempts: delivery.attempt, lastError: "no outcome after \(delivery.attempt - 1) attempts")
                    ))
            } else if sink.capabilities.contains(.push) && delivery.recipient.device == nil && delivery.recipient.topic == nil {
                screened.append((delivery, update(for: delivery, outcome: .failed(reason: "device is no longer registered to this user"), now: now)))
            } else if sink.capabilities.contains(.push) && delivery.notification.isExpired(at: now) {
                screened.append((delivery, update(for: delivery, outcome: .failed(reason: "expired before it could be pushed"), now: now)))
            } else {
                live.append(delivery)
            }
        }
        return (screened, live)
    }

    /// Feeds the sink's circuit, or for a sink whose devices each name their own service the
    /// circuit of each delivery's endpoint (``NotificationSink/endpoint(of:)``).
    func observeCircuit(of sink: any NotificationSink, named name: String, _ deliveries: [Delivery], _ outcomes: [DeliveryOutcome], at answered: Date) {
        if sink.capabilities.contains(.endpointPerDevice) {
            observeEndpointCircuits(of: sink, named: name, deliveries, outcomes, at: answered)
            return
        }
        let wasOpen = circuits.isOpen(name)
        guard circuits.observe(name, outcomes: outcomes, at: answered) else {
            if wasOpen && !circuits.isOpen(name) {
                timeline.circuit(sink: name, opened: false, reason: nil, at: answered)
                logger.notice("the circuit of sink '\(name)' closed: its probes got through")
            }
            return
        }
        let state = circuits.state(of: name)
        timeline.circuit(sink: name, opened: true, reason: state.reason, at: answered)
        logger.error(
            "the circuit of sink '\(name)' is open: \(state.reason ?? "its deliveries fail"); its deliveries wait, and \(circuits.probeBatch) probes go out in \(state.probeInterval)"
        )
        metrics.circuitOpened(sink: name)
    }

    /// Feeds the circuit of each delivery's endpoint; the sink's own is never opened by them.
    private func observeEndpointCircuits(
        of sink: any NotificationSink, named name: String, _ deliveries: [Delivery], _ outcomes: [DeliveryOutcome], at answered: Date
    ) {
        var byEndpoint: [String: [DeliveryOutcome]] = [:]
        for (delivery, outcome) in zip(deliveries, outcomes) { byEndpoint[endpoint(of: delivery, in: sink), default: []].append(outcome) }
        for (endpoint, outcomes) in byEndpoint.sorted(by: { $0.key < $1.key }) {
            let wasOpen = circuits.state(of: endpoint, of: name).isOpen
            guard circuits.observe(endpoint, of: name, outcomes: outcomes, at: answered) else {
                if wasOpen && !circuits.state(of: endpoint, of: name).isOpen {
                    logger.notice("the circuit for \(endpoint) of sink '\(name)' closed: its probes got through")
                }
                continue
            }
            let state = circuits.state(of: endpoint, of: name)
            logger.error(
                "the circuit for \(endpoint) of sink '\(name)' is open: \(state.reason ?? "its deliveries fail"); deliveries to it wait, and probes go out in \(state.probeInterval); other endpoints are not held"
            )
            metrics.circuitOpened(sink: name)
        }
    }

    /// The endpoint a delivery's circuit is kept for; one for every delivery the sink cannot
    /// place.
    func endpoint(of delivery: Delivery, in sink: any NotificationSink) -> String {
        sink.endpoint(of: delivery) ?? "(unknown endpoint)"
    }

    /// Whether a delivery's circuit (its sink's, or its endpoint's) is open now: a failure
    /// that speaks of the provider then gives its attempt back, since nothing is to fail because
    /// the provider is down.
    func circuitIsOpen(for delivery: Delivery, in sink: any NotificationSink) -> Bool {
        sink.capabilities.contains(.endpointPerDevice)
            ? circuits.state(of: endpoint(of: delivery, in: sink), of: delivery.sink).isOpen : circuits.isOpen(delivery.sink)
    }

    /// Splits `deliveries` of a sink whose devices each name their own service into those that
    /// go out now and those held (with their updates: pending until the endpoint's next probe,
    /// their attempt given back) because their endpoint's circuit is open.
    func admit(_ deliveries: [Delivery], to sink: any NotificationSink, now: Date) -> (held: [(Delivery, DeliveryUpdate)], sent: [Delivery]) {
        guard sink.capabilities.contains(.endpointPerDevice) else { return ([], deliveries) }
        var (held, sent): ([(Delivery, DeliveryUpdate)], [Delivery]) = ([], [])
        for delivery in deliveries {
            switch circuits.admit(endpoint(of: delivery, in: sink), of: delivery.sink, at: now) {
            case .send: sent.append(delivery)
            case .wait(let until, let reason):
                var update = DeliveryUpdate(id: delivery.id, state: .pending, attempts: delivery.attempt, lastError: reason, nextAttemptAt: until)
                update.givesBackAttempt = true
                held.append((delivery, update))
            }
        }
        return (held, sent)
    }

    /// One log line and the metrics for each delivery outcome.
    func observe(_ result: DeliveryUpdate, of delivery: Delivery, at now: Date) {
        let sink = delivery.sink
        let outcome = result.state == .pending ? "retry" : result.state.rawValue
        logger.info(
            "delivery \(outcome)",
            metadata: [
                "notification_id": "\(delivery.notification.id)", "sink": "\(sink)", "delivery_id": "\(delivery.id)",
                "attempt": "\(delivery.attempt)", "error": "\(result.lastError ?? "")",
            ]
        )
        let latency = Duration.saturating(seconds: max(now.timeIntervalSince(delivery.notification.timestamp), 0))
        metrics.delivery(sink: sink, outcome: outcome, latency: latency)
        timeline.record(sink: sink, outcome: outcome, at: now)
        if result.state == .pending { metrics.retryScheduled(sink: sink) }
        if result.removeDevice != nil { metrics.deadTokenRemoved(sink: sink) }
    }

    /// `update(for:outcome:now:)`, with the attempt given back for a failure that speaks of the
    /// provider while its circuit is open (a probe that was not delivered either).
    func update(for delivery: Delivery, outcome: DeliveryOutcome, in sink: any NotificationSink, now: Date) -> DeliveryUpdate {
        guard case .retry(let after, let reason, let scope) = outcome, scope.countsAgainstProvider, circuitIsOpen(for: delivery, in: sink) else {
            return update(for: delivery, outcome: outcome, now: now)
        }
        let delay = retryDelay(after: after, attempt: max(delivery.attempt - 1, 1))
        var update = DeliveryUpdate(
            id: delivery.id, state: .pending, attempts: delivery.attempt, lastError: reason, nextAttemptAt: now.addingTimeInterval(max(delay.seconds, 0)))
        update.givesBackAttempt = true
        return update
    }

    func update(for delivery: Delivery, outcome: DeliveryOutcome, now: Date) -> DeliveryUpdate {
        switch outcome {
        case .delivered:
            return DeliveryUpdate(id: delivery.id, state: .delivered, attempts: delivery.attempt)
        case .failed(let reason, _):
            return DeliveryUpdate(id: delivery.id, state: .failed, attempts: delivery.attempt, lastError: reason)
        case .recipientGone(let reason):
            return DeliveryUpdate(id: delivery.id, state: .failed, attempts: delivery.attempt, lastError: reason, removeDevice: delivery.recipient.device?.id)
        case .retry(let after, let reason, _):
            guard delivery.attempt < configuration.retry.maxAttempts else {
                return DeliveryUpdate(
                    id: delivery.id, state: .dead, attempts: delivery.attempt, lastError: "gave up after \(delivery.attempt) attempts: \(reason)")
            }
            let delay = retryDelay(after: after, attempt: delivery.attempt)
            return DeliveryUpdate(
                id: delivery.id, state: .pending, attempts: delivery.attempt, lastError: reason,
                nextAttemptAt: now.addingTimeInterval(max(delay.seconds, 0))
            )
        }
    }

    /// The provider's `Retry-After` (capped), or the backoff after `attempt`.
    func retryDelay(after: Duration?, attempt: Int) -> Duration {
        after.map { min(max($0, .zero), configuration.maxRetryAfter) } ?? configuration.retry.delay(afterAttempt: attempt)
    }
}
