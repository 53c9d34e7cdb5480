import Foundation
import HeraldStore
import HeraldTestSupport
import Synchronization
import Testing

@testable import HeraldCore

/// A sink that does not answer (a webhook receiver that hangs, a push service that never
/// replies) holds its own deliveries, not the other sinks': the worker moves on after
/// `batchPatience`, and the slow sink is given no more than its in-flight limit meanwhile.
@Suite(.cleansUp) struct StragglingSinkTests {
    /// Answers nothing until released (or cancelled); records what it was given.
    final class GatedSink: NotificationSink {
        let name: String
        let capabilities: SinkCapabilities = .perUser
        private let released = Mutex(false)
        private let state = Mutex((received: [Int64](), inProgress: 0, mostInProgress: 0))

        init(name: String) { self.name = name }

        var received: [Int64] { state.withLock { $0.received } }
        var mostInProgress: Int { state.withLock { $0.mostInProgress } }
        func release() { released.withLock { $0 = true } }

        func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] {
            state.withLock { state in
                state.received += batch.map(\.id)
                state.inProgress += batch.count
                state.mostInProgress = max(state.mostInProgress, state.inProgress)
            }
            while !released.withLock({ $0 }) && !Task.isCancelled { try? await Task.sleep(for: .milliseconds(10)) }
            state.withLock { $0.inProgress -= batch.count }
            return batch.map { _ in .delivered }
        }
    }

    struct Fixture {
        let store: SQLiteStore
        let engine: DeliveryEngine
        let running: Task<Void, any Error>

        init(_ sinks: [any NotificationSink], configure: (inout DeliveryEngineConfiguration) -> Void) async throws {
            store = try SQLiteStore(path: ":memory:")
            try await store.migrate()
            var configuration = DeliveryEngineConfiguration()
            configuration.workers = 1
            // Within the test only a wake (an accept's, or a sink's answer) brings work.
            configuration.idlePoll = .seconds(3600)
            configure(&configuration)
            let engine = DeliveryEngine(queue: store, sinks: try SinkRegistry(sinks), configuration: configuration)
            self.engine = engine
            running = Task { try await engine.run() }
        }

        /// Stores a notification for `user` with a delivery to each of `sinks`, and wakes the engine.
        @discardableResult
        func accept(for users: String..., to sinks: [String]) async throws -> ObjectID {
            let n = HeraldNotification(
                id: ObjectIDGenerator().next(), type: "comment", title: "T", body: "B", url: nil, timestamp: Date(), target: .users(users))
            let deliveries = users.flatMap { user in sinks.map { PlannedDelivery(sink: $0, userID: user, distribution: .alert) } }
            _ = try await store.accept(n, recipients: users.count, deliveries: deliveries, idempotencySince: Date())
            engine.wake()
            return n.id
        }

        /// The state and last error of the notification's delivery to `user`.
        func delivery(_ id: ObjectID, to user: String) async throws -> (DeliveryState, String?) {
            let record = try #require(try await store.status(of: id)?.deliveries.first { $0.userID == user })
            return (record.state, record.lastError)
        }

        func stop() async {
            running.cancel()
            _ = await running.result
        }
    }

    /// Polls `condition` every 10 ms for up to `seconds`.
    static func eventually(within seconds: Int = 20, _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return try await condition()
    }

    @Test func aSinkThatDoesNotAnswerHoldsBackNoOtherSink() async throws {
        let slow = GatedSink(name: "slow")
        let fast = RecordingSink(name: "fast", capabilities: .perUser)
        let f = try await Fixture([slow, fast]) { $0.batchPatience = .milliseconds(200) }
        try await f.accept(for: "u1", to: ["slow", "fast"])
        #expect(try await Self.eventually { slow.received.count == 1 && fast.received.count == 1 })
        // The first batch's slow part still waits for its answer; the next batch goes out.
        try await f.accept(for: "u2", to: ["slow", "fast"])
        #expect(try await Self.eventually { fast.received.count == 2 }, "the fast sink's next delivery was not held back by the slow one")
        #expect(try await Self.eventually { slow.received.count == 2 })
        #expect(try await Self.eventually { try await f.store.queueStats().pending == 2 }, "the slow sink's two are leased, not answered")
        slow.release()
        #expect(try await Self.eventually { try await f.store.queueStats().pending == 0 }, "its answers are recorded when they come")
        await f.stop()
    }

    @Test func aSinkGivenItsLimitGetsNoMoreUntilItAnswers() async throws {
        let slow = GatedSink(name: "slow")
        let f = try await Fixture([slow]) {
            $0.batchSize = 1
            $0.batchPatience = .milliseconds(20)
            $0.sinkInFlightLimit = 2
        }
        for index in 0..<5 { try await f.accept(for: "u\(index)", to: ["slow"]) }
        #expect(try await Self.eventually { slow.received.count == 2 })
        // Its deliveries are due, but not for this worker: it waits for a wake rather than
        // looking for them again and again.
        #expect(try await Self.eventually { f.engine.idleWorkers == 1 })
        for _ in 0..<40 {
            #expect(f.engine.idleWorkers == 1 && slow.received.count == 2)
            try await Task.sleep(for: .milliseconds(10))
        }
        slow.release()
        #expect(try await Self.eventually { try await f.store.queueStats().pending == 0 }, "each answer lets one more through")
        #expect(slow.received.count == 5 && Set(slow.received).count == 5)
        #expect(slow.mostInProgress == 2)
        await f.stop()
    }

    /// Reports a delivery for a user whose name starts with "slow" only once released (or
    /// cancelled), every other one at once; and, to show what the engine makes of them, the
    /// first outcome twice and one for a delivery that is not in the batch.
    final class ReportingSink: NotificationSink {
        let name = "reporting"
        let capabilities: SinkCapabilities = .perUser
        let released = Mutex(false)

        func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] { batch.map { _ in .delivered } }

        func deliver(_ batch: [Delivery], reporting report: DeliveryReporter) async {
            let fast = batch.indices.filter { !batch[$0].recipient.userID.hasPrefix("slow") }
            await report(fast.map { ($0, .delivered) } + fast.prefix(1).map { ($0, .failed(reason: "a second outcome")) } + [(batch.count, .delivered)])
            while !released.withLock({ $0 }) && !Task.isCancelled { try? await Task.sleep(for: .milliseconds(10)) }
            await report(batch.indices.filter { batch[$0].recipient.userID.hasPrefix("slow-") }.map { ($0, .delivered) })
        }
    }

    /// A sink that reports outcomes as they come has each recorded then, and counted out of its
    /// workload, while its slow sends go on; what it reports twice or outside its batch is
    /// dropped, and what it never reports is retried.
    @Test func aSinkThatReportsAsItGoesHoldsBackOnlyItsSlowSends() async throws {
        let sink = ReportingSink()
        let f = try await Fixture([sink]) {
            $0.batchSize = 3
            $0.batchPatience = .milliseconds(20)
            $0.sinkInFlightLimit = 2
        }
        // One commit, so one batch: a slow send, one reported at once, and one never reported
        // ("slow." is slow, but not "slow-").
        let id = try await f.accept(for: "slow-1", "fast-1", "slow.never", to: ["reporting"])
        #expect(
            try await Self.eventually { try await f.delivery(id, to: "fast-1").0 == .delivered },
            "recorded while the slow one waits, its second outcome dropped")
        #expect(try await f.delivery(id, to: "slow-1").0 == .pending)
        // Two of the three still count: the sink is full until one more is answered.
        #expect(f.engine.workload.count(of: "reporting") == 2)
        sink.released.withLock { $0 = true }
        #expect(try await Self.eventually { f.engine.workload.count(of: "reporting") == 0 })
        #expect(try await f.delivery(id, to: "slow-1").0 == .delivered)
        let (state, error) = try await f.delivery(id, to: "slow.never")
        #expect(state == .pending && error?.contains("gave no outcome") == true, "the one never reported is retried: \(String(describing: error))")
        #expect(try await f.delivery(id, to: "fast-1").0 == .delivered)
        await f.stop()
    }

    /// A queue whose records fail (storage gone), its claims working.
    final class FailingRecords: DeliveryQueue {
        let store: SQLiteStore
        init(_ store: SQLiteStore) { self.store = store }

        func claimDue(now: Date, limit: Int, lease: Duration, sinks: SinkFilter) async throws -> [Delivery] {
            try await store.claimDue(now: now, limit: limit, lease: lease, sinks: sinks)
        }
        func record(_ updates: [DeliveryUpdate], at date: Date) async throws { throw CancellationError() }
        func extendLeases(_ leases: [DeliveryLease], until: Date) async throws {}
        func nextDueDate(sinks: SinkFilter) async throws -> Date? { try await store.nextDueDate(sinks: sinks) }
        func queueStats() async throws -> QueueStats { try await store.queueStats() }
        func oldestPendingBySink() async throws -> [String: Date] { try await store.oldestPendingBySink() }
        func watchForWork(_ heard: @escaping @Sendable (WorkNotice) -> Void) async throws {}
    }

    /// When outcomes cannot be recorded, the deliveries the sink was not handed (one past its
    /// attempts here) do not stop the others being sent, and nothing stays counted in the sink's
    /// workload (a sink counted full for good would never be given work again).
    @Test func aFailedRecordLeavesNothingCountedAndSendsTheRest() async throws {
        let store = try SQLiteStore(path: ":memory:")
        try await store.migrate()
        let sink = RecordingSink(name: "rec", capabilities: .perUser)
        var configuration = DeliveryEngineConfiguration()
        configuration.retry = RetryPolicy(maxAttempts: 1, baseDelay: .seconds(1), maxDelay: .seconds(1))
        let engine = DeliveryEngine(queue: FailingRecords(store), sinks: try SinkRegistry([sink]), configuration: configuration)
        for user in ["spent", "fresh"] {
            let n = HeraldNotification(
                id: ObjectIDGenerator().next(), type: "comment", title: "T", body: "B", url: nil, timestamp: Date(), target: .users([user]))
            _ = try await store.accept(
                n, recipients: 1, deliveries: [PlannedDelivery(sink: "rec", userID: user, distribution: .alert)], idempotencySince: Date())
            // The first one's only attempt is spent by a claim whose lease runs out at once.
            if user == "spent" { _ = try await store.claimDue(now: Date(), limit: 1, lease: .zero, sinks: .excluding([])) }
        }
        await #expect(throws: (any Error).self) { try await engine.processDue() }
        #expect(sink.received.map(\.recipient.userID) == ["fresh"], "the live one was sent")
        #expect(engine.workload.count(of: "rec") == 0)
        #expect(engine.workload.full.isEmpty)
    }

    /// Handed-off deliveries to a sink that has all it may have wait in the hand-off queue, in
    /// order, while those to other sinks are taken.
    @Test func theHandOffKeepsAFullSinksDeliveries() {
        let handOff = DeliveryHandOff(capacity: 10, lease: .seconds(60))
        let n = HeraldNotification(id: ObjectIDGenerator().next(), type: "comment", title: "T", body: "B", url: nil, timestamp: Date(), target: .users(["u"]))
        let sinks = ["slow", "fast", "slow", "fast", "fast"]
        handOff.hand(
            sinks.enumerated().map {
                Delivery(id: Int64($0.offset), sink: $0.element, notification: n, recipient: DeliveryRecipient(userID: "u"), distribution: .alert, attempt: 1)
            })
        #expect(handOff.take(max: 2, skipping: ["slow"]).map(\.id) == [1, 3])
        #expect(handOff.queuedLeases.map(\.id) == [0, 2, 4], "the rest waits, leases kept")
        #expect(handOff.take(max: 10).map(\.id) == [0, 2, 4])
    }

    /// Stopping the engine waits for the sink still sending, or cancels it, but returns.
    @Test func anEngineStopsWithASinkStillSending() async throws {
        let slow = GatedSink(name: "slow")
        let f = try await Fixture([slow]) { $0.batchPatience = .milliseconds(20) }
        try await f.accept(for: "u1", to: ["slow"])
        #expect(try await Self.eventually { slow.received.count == 1 })
        let ended = Mutex(false)
        let waiter = Task {
            await f.stop()
            ended.withLock { $0 = true }
        }
        // A sink that never answers would hold a stop for good; 10 s was passed once under the
        // whole suite's load by a stop that did return.
        #expect(try await Self.eventually(within: 60) { ended.withLock { $0 } })
        await waiter.value
    }
}
