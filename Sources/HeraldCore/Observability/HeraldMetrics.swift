public import CoreMetrics
public import Foundation

/// Herald's metrics, written through swift-metrics to whatever backend the embedder chose
/// (`herald serve` exports them in Prometheus format at `GET /metrics`). Names follow
/// Prometheus conventions; each method is one event.
public struct HeraldMetrics: Sendable {
    /// Where metrics go: a sink records metrics of its own through it
    /// (`Counter(label: "herald_fcm_token_refreshes_total", dimensions: [("sink", name)], factory: metrics.factory)`).
    public let factory: any MetricsFactory
    private let handles = MetricHandles()

    /// - Parameter factory: where metrics go; the default is swift-metrics' global backend
    ///   (a no-op unless bootstrapped).
    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
    }

    /// A notification (or Message Hub message) was committed.
    public func accepted(type: String, target: String, latency: Duration) {
        handles.counter("herald_notifications_accepted_total", [("type", type), ("target", target)], factory: factory).increment()
        handles.timer("herald_accept_duration_seconds", [("target", target)], factory: factory).recordNanoseconds(latency.nanoseconds)
    }

    /// `count` deliveries reached a final or retry outcome; `latency` counts from the accept
    /// (when the delivery was due) to the provider's answer: `herald_delivery_age_seconds`, by
    /// sink and outcome, shows how long deliveries wait while a provider fails part of the time.
    public func delivery(sink: String, outcome: String, latency: Duration?, count: Int = 1) {
        guard count > 0 else { return }
        handles.counter("herald_deliveries_total", [("sink", sink), ("outcome", outcome)], factory: factory).increment(by: Int64(count))
        if let latency {
            let age = handles.timer("herald_delivery_age_seconds", [("sink", sink), ("outcome", outcome)], factory: factory)
            for _ in 0..<count { age.recordNanoseconds(latency.nanoseconds) }
        }
        if let latency, outcome == "delivered" {
            let timer = handles.timer("herald_delivery_duration_seconds", [("sink", sink)], factory: factory)
            for _ in 0..<count { timer.recordNanoseconds(latency.nanoseconds) }
        }
    }

    /// A failed delivery of `sink` was scheduled to be tried again.
    public func retryScheduled(sink: String) {
        Counter(label: "herald_delivery_retries_total", dimensions: [("sink", sink)], factory: factory).increment()
    }

    /// A device token the provider reported gone was removed.
    public func deadTokenRemoved(sink: String) {
        Counter(label: "herald_dead_tokens_removed_total", dimensions: [("sink", sink)], factory: factory).increment()
    }

    /// Pending deliveries and how long the oldest has waited, sampled when metrics are read.
    public func queue(pending: Int, oldestAge: TimeInterval) {
        Gauge(label: "herald_queue_pending_deliveries", factory: factory).record(pending)
        Gauge(label: "herald_queue_oldest_pending_age_seconds", factory: factory).record(oldestAge)
    }

    /// A request refused before it reached the router (the HTTP parser's faults, a bad `Host`),
    /// by the refusal's error code: no route sees it, so `herald_http_requests_total` cannot.
    public func httpRefused(code: String) {
        handles.counter("herald_http_refused_total", [("code", code)], factory: factory).increment()
    }

    /// A request answered, by method, route pattern (never the path: ids would be labels) and status.
    public func httpRequest(method: String, route: String, status: Int) {
        handles.counter("herald_http_requests_total", [("method", method), ("route", route), ("status", String(status))], factory: factory).increment()
    }

    /// A retention pass over one kind (`history`, `deliveries`, `events`…): rows it removed, and
    /// whether it was cut short with rows past their retention still there (1 while purging
    /// falls behind writing).
    public func retention(kind: String, purged: Int, behind: Bool) {
        Counter(label: "herald_retention_purged_total", dimensions: [("kind", kind)], factory: factory).increment(by: Int64(purged))
        Gauge(label: "herald_retention_behind", dimensions: [("kind", kind)], factory: factory).record(behind ? 1 : 0)
    }

    /// Devices Herald removed itself: `limit` (a user registered more than `devices.max_per_user`)
    /// or `stale` (not registered again for `devices.stale_after`).
    public func devicesRemoved(reason: String, count: Int) {
        Counter(label: "herald_devices_removed_total", dimensions: [("reason", reason)], factory: factory).increment(by: Int64(count))
    }

    /// Engagement events stored, by type (`identify`, `focus`, `reaction`, `track`).
    public func eventsStored(type: String, count: Int) {
        Counter(label: "herald_events_total", dimensions: [("type", type)], factory: factory).increment(by: Int64(count))
    }

    /// Score updates by outcome: `applied`, `ignored_seen`, `stale`, `rejected`.
    public func scoreUpdates(outcome: String, count: Int) {
        guard count > 0 else { return }
        Counter(label: "herald_card_score_updates_total", dimensions: [("outcome", outcome)], factory: factory).increment(by: Int64(count))
    }

    /// A sink's circuit opened after consecutive failures.
    public func circuitOpened(sink: String) {
        Counter(label: "herald_sink_circuit_opened_total", dimensions: [("sink", sink)], factory: factory).increment()
    }

    /// Whether a sink's circuit is open (1) or closed (0), sampled when metrics are read.
    public func circuit(sink: String, open: Bool) {
        Gauge(label: "herald_sink_circuit_open", dimensions: [("sink", sink)], factory: factory).record(open ? 1 : 0)
    }

    /// Whether a sink instance reported itself healthy (1) or degraded (0), sampled when
    /// metrics are read.
    public func sinkHealth(sink: String, ok: Bool) {
        Gauge(label: "herald_sink_healthy", dimensions: [("sink", sink)], factory: factory).record(ok ? 1 : 0)
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds.multipliedReportingOverflow(by: 1_000_000_000).overflow
            ? (seconds < 0 ? .min : .max) : (seconds * 1_000_000_000).saturatingAdd(attoseconds / 1_000_000_000)
    }
}
