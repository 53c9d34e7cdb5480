import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Synchronization
import Testing

/// A sink slower than `delivery.lease`, with two workers (two engines, as two processes would
/// have) on one database: the heartbeat keeps the leases, so each delivery is sent once and
/// counted once.
@Suite(.cleansUp) struct SlowSinkLeaseTests {
    /// Takes `delay` per batch, records every call.
    final class SlowSink: NotificationSink {
        let name = "slow"
        let capabilities: SinkCapabilities = .perUser
        let delay: Duration
        let calls = Mutex<[Int64]>([])

        init(delay: Duration) { self.delay = delay }

        var routingRules: [RoutingRule] { [RoutingRule(add: ["slow"])] }

        func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] {
            calls.withLock { $0.append(contentsOf: batch.map(\.id)) }
            try? await Task.sleep(for: delay)
            return batch.map { _ in .delivered }
        }
    }

    @Test func aBatchSlowerThanTheLeaseIsSentOnce() async throws {
        let directory = try TestResources.temporaryDirectory("herald-slow")
        let path = directory.appendingPathComponent("q.sqlite").path
        let first = try SQLiteStore(path: path)
        TestResources.register { await first.close() }
        try await first.migrate()
        let second = try SQLiteStore(path: path)
        TestResources.register { await second.close() }
        let sink = SlowSink(delay: .milliseconds(7_000))
        let sinks = try SinkRegistry([sink])
        var configuration = DeliveryEngineConfiguration()
        // Three seconds, so a heartbeat (every second) may run two seconds late, as it can while
        // the whole suite shares two cores, and the batch still outlives the lease twice over.
        configuration.lease = .seconds(3)
        let ids = ObjectIDGenerator()
        for index in 0..<3 {
            let n = HeraldNotification(id: ids.next(), type: "comment", title: "T", body: "B", url: nil, timestamp: Date(), target: .users(["u\(index)"]))
            _ = try await first.accept(
                n, recipients: 1, deliveries: [PlannedDelivery(sink: "slow", userID: "u\(index)", distribution: .alert)], idempotencySince: Date())
        }
        let workerA = DeliveryEngine(queue: first, sinks: sinks, configuration: configuration)
        let workerB = DeliveryEngine(queue: second, sinks: sinks, configuration: configuration)
        // A claims everything; B keeps looking while A's slow batch outlives the lease.
        async let a = workerA.processDue()
        // Wait until A is inside its slow sink, holding every lease.
        while sink.calls.withLock({ $0.count }) < 3 { try await Task.sleep(for: .milliseconds(10)) }
        var claimedByB = 0
        let deadline = ContinuousClock.now + .milliseconds(7_300)
        while ContinuousClock.now < deadline {
            claimedByB += try await workerB.processDue()
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(try await a == 3)
        #expect(claimedByB == 0, "the heartbeat kept A's leases")
        #expect(sink.calls.withLock { $0 }.count == 3, "each delivery was sent once")
        let stats = try await first.queueStats()
        #expect(stats.pending == 0)
    }
}
