import Foundation
import HeraldCore
import HeraldHistorySink
import HeraldStore

/// Posts a Message Hub message to a topic with N subscribers on a fresh SQLite file and
/// reports how long it takes until every subscriber's history row is written, and the peak RSS.
///
///     swift run -c release herald-fanout-bench [--subscribers 100000]
@main
struct FanOutBenchmark {
    static func main() async throws {
        let arguments = CommandLine.arguments
        var subscribers = 100_000
        if let index = arguments.firstIndex(of: "--subscribers"), index + 1 < arguments.count, let value = Int(arguments[index + 1]), value > 0 {
            subscribers = value
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-fanout-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(path: directory.appendingPathComponent("bench.sqlite").path)
        try await store.migrate()

        let ids = ObjectIDGenerator()
        let channel = Channel(id: ids.next(), name: "bench", desc: "")
        let area = Area(id: ids.next(), name: "bench", desc: "")
        let subjectID = ids.next()
        let key = TopicKey(channelID: channel.id, areaID: area.id, subjectID: subjectID).description
        try await store.createChannel(channel)
        _ = try await store.createArea(area, channelID: channel.id)
        _ = try await store.createSubject(
            Subject(id: subjectID, name: "bench", desc: "", topicKey: key, opt: .init(level: .optIn, distribution: .alert)), channelID: channel.id, areaID: area.id
        )
        let setup = ContinuousClock.now
        for i in 0..<subscribers {
            try await store.subscribe(userID: "user-\(i)", topicKey: key, at: Date())
            if i % 20_000 == 0 { FileHandle.standardError.write(Data("\rsubscribing \(i)/\(subscribers)".utf8)) }
        }
        FileHandle.standardError.write(Data("\rsubscribed \(subscribers) in \(ContinuousClock.now - setup)\n".utf8))

        let sinks = try SinkRegistry([HistorySink(store: store)])
        let service = NotificationService(
            validator: NotificationValidator(types: try NotificationTypes(), resources: try ResourceResolver(publicBaseURL: "https://bench.example")),
            router: try NotificationRouter(registry: sinks), sinks: sinks, store: store, ids: ids
        )
        var configuration = DeliveryEngineConfiguration()
        configuration.batchSize = 1_000
        let engine = DeliveryEngine(queue: store, sinks: sinks, configuration: configuration)

        let rssBefore = peakRSS()
        let start = ContinuousClock.now
        _ = try await service.postMessage(MessageSubmission(title: "Bench", desc: "fan-out", message: "", topicKey: key, distribution: "Alert"), sender: "bench")
        let accepted = ContinuousClock.now - start
        try await engine.drain()
        let total = ContinuousClock.now - start
        let delivered = try await store.sinkCounters().first { $0.sink == "history" }?.counts[.delivered] ?? 0
        print("subscribers        \(subscribers)")
        print("accepted (201) in  \(accepted)")
        print("history written in \(total)  (\(Int(Double(delivered) / max(total.seconds, 0.001)))/s)")
        print("history rows       \(delivered)")
        print("peak RSS           \(rssBefore / 1024) MiB before, \(peakRSS() / 1024) MiB after")
        guard delivered == subscribers else {
            FileHandle.standardError.write(Data("error: \(delivered) history rows for \(subscribers) subscribers\n".utf8))
            exit(1)
        }
    }

    /// VmHWM from /proc/self/status, in KiB (0 where unavailable).
    static func peakRSS() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }
        return 0
    }
}
