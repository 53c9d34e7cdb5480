import HeraldCore

/// One sink instance's health as `GET /health/sinks`, `herald sinks`, /metrics and the portal
/// show it.
public struct SinkHealthReport: Sendable, Equatable, Encodable {
    public var name: String
    /// What the sink does (``NotificationSink/summary``).
    public var kind: String
    /// `ok` or `degraded`.
    public var status: String
    public var reason: String?

    /// Whether the sink's circuit is open (the delivery engine stopped sending to it).
    public var circuitOpen = false
    /// How often its circuit has opened since the process started.
    public var circuitOpened = 0
    /// The share of the deliveries its circuit judges by (the last `circuit.window` whose outcome
    /// speaks of the provider) that failed, and how many those are.
    public var failureRate = 0.0
    public var judged = 0

    enum CodingKeys: String, CodingKey {
        case name, kind, status, reason
        case circuitOpen = "circuit_open"
        case circuitOpened = "circuit_opened"
        case failureRate = "failure_rate"
        case judged = "deliveries_judged"
    }

    /// Asks every sink at once, in registry order; an open circuit makes a sink degraded.
    public static func collect(_ sinks: SinkRegistry, circuits: CircuitBreakers? = nil) async -> [SinkHealthReport] {
        await withTaskGroup(of: (Int, SinkHealthReport).self) { group in
            for (index, sink) in sinks.sinks.enumerated() {
                group.addTask {
                    // A sink's reason may carry a provider's words: bounded as a delivery's are.
                    var health = await sink.health()
                    if let reason = health.reason { health = .degraded(reason: FailureReason.storable(reason)) }
                    let circuit = circuits?.state(of: sink.name) ?? CircuitBreakers.State()
                    if circuit.isOpen {
                        let probe = circuit.nextProbeAt.map { " at \(Timestamp.format($0))" } ?? " now"
                        let reason = "circuit open: \(circuit.reason ?? "its deliveries fail"); deliveries wait, next probes\(probe)"
                        health = .degraded(reason: health.reason.map { "\($0); \(reason)" } ?? reason)
                    }
                    var report = SinkHealthReport(name: sink.name, kind: sink.summary, status: health.isOK ? "ok" : "degraded", reason: health.reason)
                    report.circuitOpen = circuit.isOpen
                    report.circuitOpened = circuit.timesOpened
                    (report.failureRate, report.judged) = (circuit.failureRate, circuit.judged)
                    return (index, report)
                }
            }
            var reports: [(Int, SinkHealthReport)] = []
            for await report in group { reports.append(report) }
            return reports.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }
}
