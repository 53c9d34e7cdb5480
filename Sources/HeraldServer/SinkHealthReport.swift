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

    /// Asks every sink at once, in registry order.
    public static func collect(_ sinks: SinkRegistry) async -> [SinkHealthReport] {
        await withTaskGroup(of: (Int, SinkHealthReport).self) { group in
            for (index, sink) in sinks.sinks.enumerated() {
                group.addTask {
                    let health = await sink.health()
                    return (index, SinkHealthReport(name: sink.name, kind: sink.summary, status: health.isOK ? "ok" : "degraded", reason: health.reason))
                }
            }
            var reports: [(Int, SinkHealthReport)] = []
            for await report in group { reports.append(report) }
            return reports.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }
}
