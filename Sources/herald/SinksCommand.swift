import ArgumentParser
import Foundation
import HeraldCore
import HeraldProcessTuning
import HeraldServer
import HeraldStore
import Synchronization

struct Sinks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the configured delivery sinks with their health and delivery counters.")

    @OptionGroup var common: CommonOptions

    @Option(help: "The window of the finished states' counts and the latest error: 90s, 30m, 24h or 7d (at most 7d).")
    var since = "24h"

    func validate() throws {
        guard WindowLength(since).seconds != nil else {
            throw ValidationError("--since must be a duration such as 90s, 30m, 24h or 7d, at most 7d (got '\(since)')")
        }
    }

    func run() async throws {
        // A window, not every delivery kept (`retention.deliveries` may keep months): counting all
        // of them read every one (docs/performance.md, "What `herald sinks` reads").
        let window = TimeInterval(WindowLength(since).seconds ?? 86_400)
        let configuration = try await reportingErrors { try await common.load() }
        // Refused before the server starts, which would make the database or fill it.
        try await common.openStore(configuration, ifMissing: .refuse).close()
        let server = try await reportingErrors { try await HeraldServer.start(configuration) }
        let counters: [SinkCounters]
        do {
            counters = try await server.store.sinkCounters(finishedSince: Date().addingTimeInterval(-window))
        } catch {
            await server.close()
            return try await reportingErrors { throw error }
        }
        let health = await SinkHealthReport.collect(server.sinks, circuits: server.engine.circuits, queue: server.store)
        await server.close()
        func row(_ name: String, _ kind: String, _ channel: String, _ state: String) -> [String] {
            let counts = counters.first { $0.sink == name }
            let numbers = DeliveryState.allCases.map { String(counts?.counts[$0] ?? 0) }
            return [name, kind, channel, state] + numbers + [counts?.lastError.map { String($0.prefix(80)) } ?? ""]
        }
        // Sinks with stored deliveries that this configuration no longer has are listed too:
        // their pending deliveries wait for the sink to come back.
        let configured = Set(server.sinks.names)
        let rows =
            health.map { row($0.name, $0.kind, $0.channelLabel, $0.reason.map { "degraded: \($0)" } ?? "ok") }
            + counters.filter { !configured.contains($0.sink) }.map { row($0.sink, "-", "-", "not configured") }
        let header = ["SINK", "KIND", "CHANNEL", "STATE"] + DeliveryState.allCases.map { $0.rawValue.uppercased() } + ["LAST ERROR"]
        print("PENDING and HELD wait now; the other states were reached, and the last error recorded, in the last \(since).")
        let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
        for row in [header] + rows {
            print(
                zip(row, widths).map { $0.0.padding(toLength: $0.1, withPad: " ", startingAt: 0) }.joined(separator: "  ").trimmingCharacters(in: .whitespaces))
        }
    }
}
