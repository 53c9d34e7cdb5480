import Foundation
import HeraldServer
import HeraldTestSupport
import Testing

@testable import HeraldCore

/// What `GET /health/sinks` says of a sink whose devices each name their own service: the
/// endpoints whose circuits are open, with why and when they are probed next, while the sink
/// itself stays `ok` (its other endpoints are sent to).
@Suite struct SinkHealthReportTests {
    @Test func openEndpointsAreListedAndTheSinkStaysOK() async throws {
        let sink = RecordingSink(name: "webpush", capabilities: [.push, .endpointPerDevice])
        let registry = try SinkRegistry([sink])
        var configuration = CircuitConfiguration()
        configuration.minimumCalls = 3
        let circuits = CircuitBreakers(configuration: configuration)
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let refused = DeliveryOutcome.retry(after: nil, reason: "connection refused", scope: .provider)
        #expect(circuits.observe("https://down.example", of: "webpush", outcomes: [refused, refused, refused], at: now))
        circuits.observe("https://up.example", of: "webpush", outcomes: [.delivered, .delivered, .delivered], at: now)

        let report = try #require(await SinkHealthReport.collect(registry, circuits: circuits, now: now).first)
        #expect(report.status == "ok" && !report.circuitOpen)
        #expect(report.openEndpoints.map(\.endpoint) == ["https://down.example"])
        #expect(report.openEndpoints.first?.reason.contains("0 of its last 3 deliveries got through") == true)
        #expect(report.openEndpoints.first?.nextProbeAt == Timestamp.format(now.addingTimeInterval(2)))
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(report)) as? [String: Any]
        let listed = json?["open_endpoints"] as? [[String: Any]]
        #expect(listed?.first?["endpoint"] as? String == "https://down.example" && listed?.first?["next_probe_at"] is String, "\(json ?? [:])")
    }
}
