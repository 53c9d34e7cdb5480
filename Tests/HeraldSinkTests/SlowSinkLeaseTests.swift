import Foundation
import HeraldStore
import HeraldTestSupport
import Synchronization
import Testing

@testable import HeraldCore

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

    /// Two stores on one migrated database file, as two processes would have.
    static func twoStores() async throws -> (SQLiteStore, SQLiteStore) {
        let path = try TestResources.temporaryDirectory("herald-slow").appendingPathComponent("q.sqlite").path
        let first = try SQLiteStore(path: path)
        TestResources.register { await first.close() }
        try await first.migrate()
        let second = try SQLiteStore(path: path)
        TestResources.register { await second.close() }
        return (first, second)
    }

    @Test func aBatchSlowerThanTheLeaseIsSentOnce() async throws {
        let (first, second) = try await Self.twoStores()
        let sink = SlowSink(delay: .milliseconds(14_000))
        let sinks = try SinkRegistry([sink])
        var configuration = DeliveryEngineConfiguration()
        // Six seconds, so a heartbeat (every two) may run four seconds late, as it can while
        // the whole suite shares two cores (two was seen to be too few once), and the batch
        // still outlives the lease twice over.
        configuration.lease = .seconds(6)
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
        let deadline = ContinuousClock.now + .milliseconds(14_300)
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

    /// Two stores on one file (``twoStores()``), and an engine (one worker, one delivery per
    /// batch, waited for however slow, a 9 s lease) running on the first, to which accepts hand
    /// their deliveries.
    struct HandOffFixture {
        let first: SQLiteStore
        let second: SQLiteStore
        let engine: DeliveryEngine
        let other: DeliveryEngine
        let running: Task<Void, any Error>

        /// Starts the engine and waits until its worker is idle, as `herald serve`'s is before
        /// accepts come: a handed-off lease counts from the accept.
        init(_ sink: SlowSink) async throws {
            let (first, second) = try await SlowSinkLeaseTests.twoStores()
            var configuration = DeliveryEngineConfiguration()
            // Nine seconds: a heartbeat (every three) may run six seconds late while the whole
            // suite shares two cores (four was seen to be too few once).
            configuration.lease = .seconds(9)
            configuration.workers = 1
            configuration.batchSize = 1
            // The worker waits for its batch however slow: the next delivery waits in the
            // hand-off queue meanwhile.
            configuration.batchPatience = .seconds(3600)
            configuration.idlePoll = .seconds(3600)
            let sinks = try SinkRegistry([sink])
            let engine = DeliveryEngine(queue: first, sinks: sinks, configuration: configuration)
            self.first = first
            self.second = second
            self.engine = engine
            self.other = DeliveryEngine(queue: second, sinks: sinks, configuration: configuration)
            running = Task { try await engine.run() }
            for _ in 0..<1_000 where engine.idleWorkers < 1 { try await Task.sleep(for: .milliseconds(10)) }
            try #require(engine.idleWorkers == 1, "the worker goes idle")
        }

        /// Accepts a delivery to the slow sink for each of `count` users, handed to the engine.
        func accept(_ count: Int) async throws {
            let ids = ObjectIDGenerator()
            for index in 0..<count {
                let n = HeraldNotification(id: ids.next(), type: "comment", title: "T", body: "B", url: nil, timestamp: Date(), target: .users(["u\(index)"]))
                _ = try await first.acceptUsers(
                    n, userIDs: ["u\(index)"], route: { [PlannedDelivery(sink: "slow", userID: $0.userID, distribution: .alert)] }, idempotency: nil,
                    idempotencySince: Date(), handOff: engine.handOff)
            }
            engine.wake()
        }

        func stop() async {
            running.cancel()
            _ = await running.result
        }
    }

    /// A handed-off delivery waiting behind a batch slower than the lease keeps its lease: the
    /// engine's heartbeat covers its hand-off queue too (which holds two batches per worker),
    /// so another process claims nothing and each delivery is sent once.
    @Test func handedOffDeliveriesWaitingBehindASlowBatchKeepTheirLeases() async throws {
        let sink = SlowSink(delay: .milliseconds(12_000))
        let f = try await HandOffFixture(sink)
        try await f.accept(2)
        var claimedByOther = 0
        // The second delivery waits about 12 s in the queue (past its 9 s lease), then is sent.
        let deadline = ContinuousClock.now + .milliseconds(45_000)
        while ContinuousClock.now < deadline && sink.calls.withLock({ $0.count }) < 2 {
            claimedByOther += try await f.other.processDue()
            try await Task.sleep(for: .milliseconds(100))
        }
        await f.stop()
        #expect(claimedByOther == 0, "the heartbeat kept the queued lease")
        #expect(sink.calls.withLock { $0 }.count == 2, "each delivery was sent once")
    }

    /// At shutdown, handed-off deliveries no worker took are given back: due at once for any
    /// process, not after their leases.
    @Test func anEngineThatStopsGivesBackWhatItWasHanded() async throws {
        let sink = SlowSink(delay: .milliseconds(1_000))
        let f = try await HandOffFixture(sink)
        try await f.accept(2)
        while sink.calls.withLock({ $0.count }) < 1 { try await Task.sleep(for: .milliseconds(10)) }
        await f.stop()
        #expect(f.engine.handOff.count == 0)
        let sent = sink.calls.withLock { $0 }
        let retaken = try await f.second.claimDue(now: Date(), limit: 10, lease: .seconds(3))
        #expect(retaken.count == 2 - sent.count && retaken.count == 1, "the rest is due now")
        #expect(Set(retaken.map(\.id)).isDisjoint(with: sent))
        #expect(retaken.allSatisfy { $0.attempt == 2 })
    }
}
