import Foundation
import HeraldCore

/// One sink instance's health as `GET /health/sinks`, `herald sinks`, /metrics and the portal
/// show it.
public struct SinkHealthReport: Sendable, Equatable, Encodable {
    public var name: String
    /// What the sink does (``NotificationSink/summary``).
    public var kind: String
    /// The channel it delivers on (docs/routing.md, "Channels and preferences").
    public var channel: String = SinkChannel.operatorOnly.name
    /// Whether users' preferences apply to it.
    public var userFacing = false
    /// The channel as `herald sinks` and the portal show it (``SinkChannel/description``).
    public var channelLabel: String { SinkChannel(channel, userFacing: userFacing).description }
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
    /// How long the sink's oldest pending delivery has waited since it was due (its accept),
    /// in seconds; nil with none pending.
    public var oldestWaitingSeconds: Double?
    /// For a sink whose devices each name their own service (Web Push): the endpoints whose
    /// circuits are open. Their deliveries wait; the sink's other endpoints are sent to, so the
    /// sink itself stays `ok`.
    public var openEndpoints: [OpenEndpoint] = []

    /// One endpoint's open circuit.
    public struct OpenEndpoint: Sendable, Equatable, Encodable {
        public var endpoint: String
        public var reason: String
        /// When its next round of probes may go out (RFC 3339).
        public var nextProbeAt: String?

        enum CodingKeys: String, CodingKey {
            case endpoint, reason
            case nextProbeAt = "next_probe_at"
        }
    }

    enum CodingKeys: String, CodingKey {
        case name, kind, channel, status, reason
        case userFacing = "user_facing"
        case circuitOpen = "circuit_open"
        case circuitOpened = "circuit_opened"
        case failureRate = "failure_rate"
        case judged = "deliveries_judged"
        case oldestWaitingSeconds = "oldest_waiting_seconds"
        case openEndpoints = "open_endpoints"
    }

    /// Asks every sink at once, in registry order; an open circuit makes a sink degraded.
    /// - Parameter queue: when given, each sink's oldest pending delivery is read from it (a
    ///   storage failure leaves it out).
    public static func collect(
        _ sinks: SinkRegistry, circuits: CircuitBreakers? = nil, queue: (any DeliveryQueue)? = nil, now: Date = Date()
    ) async
        -> [SinkHealthReport]
    {
        let oldest = (try? await queue?.oldestPendingBySink()) ?? [:]
        return await withTaskGroup(of: (Int, SinkHealthReport).self) { group in
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
                    let channel = sinks.channel(of: sink)
                    (report.channel, report.userFacing) = (channel.name, channel.userFacing)
                    report.circuitOpen = circuit.isOpen
                    report.circuitOpened = circuit.timesOpened
                    (report.failureRate, report.judged) = (circuit.failureRate, circuit.judged)
                    report.oldestWaitingSeconds = oldest[sink.name].map { max(0, now.timeIntervalSince($0)) }
                    report.openEndpoints = (circuits?.openEndpoints(of: sink.name) ?? []).map {
                        OpenEndpoint(
                            endpoint: $0.endpoint, reason: $0.state.reason ?? "its deliveries fail", nextProbeAt: $0.state.nextProbeAt.map(Timestamp.format))
                    }
                    return (index, report)
                }
            }
            var reports: [(Int, SinkHealthReport)] = []
            for await report in group { reports.append(report) }
            return reports.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }
}
