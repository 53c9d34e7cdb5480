import Foundation
import HeraldStore
import HeraldTestSupport
import Synchronization
import Testing

@testable import HeraldCore

/// With several processes on PostgreSQL, a device moved or a user erased through one process
/// fails rows whose copies another process's hand-off holds; the store tells every process the
/// ids (``DeliveryQueue/watchForWork(_:)``), and the engine drops those copies before a
/// worker sends them. Before, only the process that failed the rows withdrew its own copies.
@Suite(.cleansUp) struct HandOffWithdrawalTests {
    /// SQLite for the rest, with withdrawal notices the test sends, as another process's would
    /// arrive from PostgreSQL.
    final class AnnouncingQueue: DeliveryQueue {
        let store: SQLiteStore
        private let notices: AsyncStream<[Int64]>
        private let continuation: AsyncStream<[Int64]>.Continuation
        private let listening = Mutex(false)

        init(_ store: SQLiteStore) {
            self.store = store
            (notices, continuation) = AsyncStream.makeStream(of: [Int64].self)
        }

        var isListening: Bool { listening.withLock { $0 } }
        func announce(_ ids: [Int64]) { continuation.yield(ids) }

        func watchForWork(_ heard: @escaping @Sendable (WorkNotice) -> Void) async throws {
            listening.withLock { $0 = true }
            for await ids in notices { heard(.withdrawn(ids)) }
        }

        func claimDue(now: Date, limit: Int, lease: Duration, sinks: SinkFilter) async throws -> [Delivery] {
            try await store.claimDue(now: now, limit: limit, lease: lease, sinks: sinks)
        }
        func record(_ updates: [DeliveryUpdate], at date: Date) async throws { try await store.record(updates, at: date) }
        func extendLeases(_ leases: [DeliveryLease], until: Date) async throws { try await store.extendLeases(leases, until: until) }
        func nextDueDate(sinks: SinkFilter) async throws -> Date? { try await store.nextDueDate(sinks: sinks) }
        func queueStats() async throws -> QueueStats { try await store.queueStats() }
        func oldestPendingBySink() async throws -> [String: Date] { try await store.oldestPendingBySink() }
    }

    @Test func copiesAnotherProcessFailedAreNotSent() async throws {
        let store = try SQLiteStore(path: ":memory:")
        try await store.migrate()
        let queue = AnnouncingQueue(store)
        let sink = StragglingSinkTests.GatedSink(name: "push")
        var configuration = DeliveryEngineConfiguration()
        configuration.workers = 1
        configuration.batchSize = 1
        configuration.sinkInFlightLimit = 1
        configuration.batchPatience = .milliseconds(20)
        configuration.idlePoll = .seconds(3600)
        let engine = DeliveryEngine(queue: queue, sinks: try SinkRegistry([sink]), configuration: configuration)
        let running = Task { try await engine.run() }
        #expect(try await StragglingSinkTests.eventually { queue.isListening })

        // The first is being sent; the sink may have no more, so the other two wait.
        let n = HeraldNotification(id: ObjectIDGenerator().next(), type: "comment", title: "T", body: "B", url: nil, timestamp: Date(), target: .users(["u"]))
        engine.handOff.hand(
            (1...3).map { Delivery(id: $0, sink: "push", notification: n, recipient: DeliveryRecipient(userID: "u\($0)"), distribution: .alert, attempt: 1) })
        engine.wake()
        #expect(try await StragglingSinkTests.eventually { sink.received == [1] && engine.handOff.count == 2 })

        queue.announce([2, 42])
        #expect(try await StragglingSinkTests.eventually { engine.handOff.count == 1 }, "the failed one is dropped, the unknown id ignored")
        sink.release()
        #expect(try await StragglingSinkTests.eventually { sink.received == [1, 3] && engine.handOff.count == 0 })
        #expect(try await StragglingSinkTests.eventually { engine.idleWorkers == 1 })
        #expect(sink.received == [1, 3], "the withdrawn copy never went")
        running.cancel()
        _ = await running.result
    }
}
