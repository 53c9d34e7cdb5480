import Foundation
import HeraldConsoleSink
import HeraldHistorySink
import HeraldStore
import HeraldTestSupport
import Synchronization
import Testing

@testable import HeraldCore

/// The delivery engine on a real SQLite queue, with recording sinks standing in for providers.
@Suite(.cleansUp) struct DeliveryEngineTests {
    final class TestClock: Sendable {
        let now = Mutex(Date(timeIntervalSince1970: 1_700_000_000))
        func advance(_ seconds: TimeInterval) { now.withLock { $0 = $0.addingTimeInterval(seconds) } }
        var date: Date { now.withLock { $0 } }
    }

    final class Flag: Sendable {
        private let value = Mutex(false)
        func set() { value.withLock { $0 = true } }
        var isSet: Bool { value.withLock { $0 } }
    }

    struct Fixture {
        let store: SQLiteStore
        let push = RecordingSink(name: "fcm", capabilities: .push)
        let clock = TestClock()
        let engine: DeliveryEngine
        let service: NotificationService

        /// - Parameter handOff: accepts hand their deliveries to the engine, as `herald serve`'s do.
        init(maxAttempts: Int = 3, handOff: Bool = false) async throws {
            store = try SQLiteStore(path: ":memory:")
            try await store.migrate()
            let clock = self.clock
            let sinks = try SinkRegistry([HistorySink(store: store, clock: { clock.date }), push])
            var configuration = DeliveryEngineConfiguration()
            configuration.retry = RetryPolicy(maxAttempts: maxAttempts, baseDelay: .seconds(10), maxDelay: .seconds(100))
            engine = DeliveryEngine(queue: store, sinks: sinks, configuration: configuration, clock: { clock.date })
            var service = NotificationService(
                validator: NotificationValidator(types: try NotificationTypes(), resources: try ResourceResolver(publicBaseURL: "https://app.example")),
                router: try NotificationRouter(registry: sinks), sinks: sinks, store: store, ids: ObjectIDGenerator()
            )
            if handOff { service.handOff = engine.handOff }
            self.service = service
        }

        func send(to users: [String], type: String = "comment") async throws -> ObjectID {
            try await service.send(NotificationSubmission(type: type, title: "T", body: "B", url: "/p/1", userIDs: users), now: clock.date).receipt.id
        }

        func register(_ user: String, _ token: String) async throws {
            _ = try await store.registerDevice(userID: user, registration: .token(token, provider: "fcm"), newID: ObjectIDGenerator().next(), at: clock.date)
        }

        func states(_ id: ObjectID) async throws -> [String: DeliveryState] {
            let status = try #require(try await store.status(of: id))
            return Dictionary(status.deliveries.map { ("\($0.sink):\($0.userID):\($0.deviceID?.hex ?? "-")", $0.state) }) { a, _ in a }
        }
    }

    @Test func deliversToHistoryAndEveryDevice() async throws {
        let f = try await Fixture()
        try await f.register("alice", "a1")
        try await f.register("alice", "a2")
        let id = try await f.send(to: ["alice", "bob"])
        try await f.engine.drain()
        #expect(f.push.received.count == 2)
        #expect(Set(f.push.received.compactMap(\.recipient.device?.token)) == ["a1", "a2"])
        #expect(try await f.store.history(userID: "alice", limit: 10, before: nil).items.map(\.notificationID) == [id])
        #expect(try await f.store.history(userID: "bob", limit: 10, before: nil).items.map(\.notificationID) == [id])
        #expect(try await f.states(id).values.allSatisfy { $0 == .delivered })
    }

    /// Handed off by the accept, a push is sent by the engine without a claim: nothing was
    /// claimable meanwhile, and its outcome is recorded like a claimed one's. A retry it
    /// schedules is claimed from the queue as usual.
    @Test func handedOffDeliveriesAreSentWithoutAClaim() async throws {
        let f = try await Fixture(handOff: true)
        try await f.register("alice", "a1")
        f.push.script([.retry(after: nil, reason: "503")])
        let id = try await f.send(to: ["alice"])
        #expect(f.engine.handOff.count == 1)
        #expect(try await f.store.nextDueDate() == f.clock.date.addingTimeInterval(60), "leased for the engine's lease, not due")
        #expect(try await f.engine.processDue() == 1)
        #expect(f.push.received.map { $0.recipient.device?.token } == ["a1"])
        #expect(f.push.received.first?.attempt == 1)
        #expect(try await f.states(id).values.sorted { $0.rawValue < $1.rawValue } == [.delivered, .pending], "history, and the push to retry")
        f.clock.advance(11)
        #expect(try await f.engine.processDue() == 1, "the retry is claimed")
        #expect(f.push.received.map(\.attempt) == [1, 2])
        #expect(try await f.states(id).values.allSatisfy { $0 == .delivered })
    }

    @Test func retriesWithBackoffHonouringRetryAfterThenDies() async throws {
        let f = try await Fixture(maxAttempts: 3)
        try await f.register("alice", "a1")
        f.push.script([.retry(after: .seconds(30), reason: "429 quota"), .retry(after: nil, reason: "503"), .retry(after: nil, reason: "503")])
        let id = try await f.send(to: ["alice"])
        try await f.engine.drain()
        var status = try #require(try await f.store.status(of: id))
        var push = try #require(status.deliveries.first { $0.sink == "fcm" })
        #expect(push.state == .pending && push.attempts == 1 && push.lastError == "429 quota")
        #expect(push.nextAttemptAt == f.clock.date.addingTimeInterval(30), "Retry-After is honoured exactly")

        f.clock.advance(29)
        try await f.engine.drain()
        #expect(f.push.received.count == 1, "not retried before Retry-After")
        f.clock.advance(1)
        try await f.engine.drain()
        #expect(f.push.received.count == 2)
        status = try #require(try await f.store.status(of: id))
        push = try #require(status.deliveries.first { $0.sink == "fcm" })
        let wait = try #require(push.nextAttemptAt).timeIntervalSince(f.clock.date)
        #expect(wait >= 10 && wait <= 20, "second failure backs off base*2 with jitter: \(wait)")

        f.clock.advance(25)
        try await f.engine.drain()
        status = try #require(try await f.store.status(of: id))
        push = try #require(status.deliveries.first { $0.sink == "fcm" })
        #expect(push.state == .dead && push.attempts == 3)
        #expect(push.lastError?.contains("gave up after 3 attempts") == true)
        #expect(status.deliveries.first { $0.sink == "history" }?.state == .delivered, "history is not held back by push failures")
    }

    @Test func goneRecipientRemovesTheDeviceAtOnce() async throws {
        let f = try await Fixture()
        try await f.register("alice", "dead-token")
        f.push.script([.recipientGone(reason: "UNREGISTERED")])
        let first = try await f.send(to: ["alice"])
        try await f.engine.drain()
        #expect(try await f.store.devices(userID: "alice").isEmpty)
        #expect(try await f.states(first).values.contains(.failed))
        _ = try await f.send(to: ["alice"])
        try await f.engine.drain()
        #expect(f.push.received.count == 1, "a removed token is never tried again")
    }

    @Test func permanentFailureIsNotRetried() async throws {
        let f = try await Fixture()
        try await f.register("alice", "a1")
        f.push.script([.failed(reason: "INVALID_ARGUMENT payload")])
        let id = try await f.send(to: ["alice"])
        try await f.engine.drain()
        f.clock.advance(3600)
        try await f.engine.drain()
        #expect(f.push.received.count == 1)
        let push = try #require(try await f.store.status(of: id)?.deliveries.first { $0.sink == "fcm" })
        #expect(push.state == .failed && push.lastError == "INVALID_ARGUMENT payload")
        #expect(try await f.store.devices(userID: "alice").count == 1, "a payload fault keeps the device")
    }

    @Test func expiredNotificationsAreNotPushedButStayInHistory() async throws {
        let f = try await Fixture()
        try await f.register("alice", "a1")
        let expires = Timestamp.format(f.clock.date.addingTimeInterval(5))
        let id = try await f.service.send(
            NotificationSubmission(type: "hot", title: "T", expiresAt: expires, userIDs: ["alice"]), now: f.clock.date
        ).receipt.id
        f.clock.advance(10)
        try await f.engine.drain()
        #expect(f.push.received.isEmpty)
        #expect(try await f.store.history(userID: "alice", limit: 10, before: nil).items.count == 1)
        #expect(try await f.store.status(of: id)?.deliveries.first { $0.sink == "fcm" }?.lastError?.contains("expired") == true)
    }

    @Test func aDeliveryWhoseWorkerKeepsDyingEndsDead() async throws {
        let f = try await Fixture(maxAttempts: 2)
        try await f.register("alice", "tok-a")
        let id = try await f.send(to: ["alice"])
        // Two workers claim the push and die before recording anything.
        for _ in 0..<2 {
            #expect(try await f.store.claimDue(now: f.clock.date, limit: 10, lease: .seconds(60)).map(\.sink) == ["fcm"])
            f.clock.advance(61)
        }
        try await f.engine.drain()
        #expect(try await f.states(id).values.sorted { $0.rawValue < $1.rawValue } == [.dead, .delivered], "the push is dead, the history row written")
        #expect(f.push.received.isEmpty)
    }

    @Test func runningEngineWakesOnNewWorkAndStopsOnCancel() async throws {
        let f = try await Fixture()
        var configuration = DeliveryEngineConfiguration()
        // An hour between polls: within the test only a wake can bring work.
        configuration.idlePoll = .seconds(3600)
        let realEngine = DeliveryEngine(queue: f.store, sinks: try SinkRegistry([HistorySink(store: f.store), f.push]), configuration: configuration)
        // The pushes are the queued work (an accept writes history rows itself).
        try await f.register("carol", "tok-c")
        try await f.register("dave", "tok-d")
        let running = Task { try await realEngine.run() }
        func delivered(_ id: ObjectID, within attempts: Int = 250) async throws -> Bool {
            for _ in 0..<attempts {
                if try await f.states(id).values.allSatisfy({ $0 == .delivered }) { return true }
                try await Task.sleep(for: .milliseconds(20))
            }
            return false
        }
        // Running: a woken engine delivers, then goes idle again.
        let warmUp = try await f.send(to: ["carol"])
        realEngine.wake()
        #expect(try await delivered(warmUp))
        // Every worker finds nothing more and waits (observed, not guessed from elapsed time:
        // under the whole suite's load a worker can still be reading the queue seconds later).
        for _ in 0..<1_000 where realEngine.idleWorkers < configuration.workers { try await Task.sleep(for: .milliseconds(10)) }
        try #require(realEngine.idleWorkers == configuration.workers, "the workers go idle")

        let id = try await f.send(to: ["dave"])
        #expect(try await delivered(id, within: 15) == false, "idle, and not woken: the work waits")
        realEngine.wake()
        #expect(try await delivered(id), "woken: delivered at once, not at the next poll")

        running.cancel()
        let ended = Flag()
        Task {
            _ = await running.result
            ended.set()
        }
        for _ in 0..<250 where !ended.isSet { try await Task.sleep(for: .milliseconds(20)) }
        #expect(ended.isSet, "a cancelled engine returns within 5 s")
    }
}

@Suite(.cleansUp) struct SinkTests {
    @Test func consoleSinkPrintsDeviceIDsNeverTokens() async throws {
        let lines = Mutex<[String]>([])
        let sink = ConsoleSink { line in lines.withLock { $0.append(line) } }
        let now = Date()
        let device = Device(
            id: ObjectIDGenerator().next(), userID: "u", address: DeviceAddress(provider: "fcm", token: "SECRET-TOKEN"), createdAt: now, updatedAt: now)
        let notification = HeraldNotification(
            id: ObjectIDGenerator().next(), type: "hot", title: "Hi", body: "there", url: nil, timestamp: now, target: .users(["u"]))
        let outcomes = await sink.deliver([
            Delivery(id: 1, sink: "console", notification: notification, recipient: .init(userID: "u", device: device), distribution: .information, attempt: 1)
        ])
        #expect(outcomes == [.delivered])
        let line = try #require(lines.withLock { $0.first })
        #expect(line.contains("information") && line.contains("\"Hi\"") && line.contains(device.id.hex))
        #expect(!line.contains("SECRET-TOKEN"))
    }

    @Test func historySinkRetriesWhenStorageFails() async throws {
        let store = try SQLiteStore(path: ":memory:") // never migrated: every write fails
        let sink = HistorySink(store: store)
        let now = Date()
        let notification = HeraldNotification(
            id: ObjectIDGenerator().next(), type: "hot", title: "Hi", body: "", url: nil, timestamp: now, target: .users(["u"]))
        let outcomes = await sink.deliver([
            Delivery(id: 1, sink: "history", notification: notification, recipient: .init(userID: "u"), distribution: .alert, attempt: 1)
        ])
        guard case .retry = outcomes.first else {
            Issue.record("expected a retry, got \(outcomes)")
            return
        }
    }
}

/// Fan-out to a large topic, test-sized: pages are small so the paging is exercised.
@Suite(.cleansUp) struct FanOutTests {
    @Test func topicFanOutPagesThroughEverySubscriberOnce() async throws {
        let store = try SQLiteStore(path: ":memory:")
        try await store.migrate()
        let ids = ObjectIDGenerator()
        let key = try await TopicTree.make(in: store, ids: ids).optIn.topicKey
        let subscribers = 2_345
        for i in 0..<subscribers { try await store.subscribe(userID: String(format: "user-%05d", i), topicKey: key, at: Date()) }
        _ = try await store.registerDevice(userID: "user-00007", registration: .token("t7", provider: "fcm"), newID: ids.next(), at: Date())
        _ = try await store.updateSettings(userID: "user-00008") { $0.delivery = .pull }

        let push = RecordingSink(name: "fcm", capabilities: .push)
        let sinks = try SinkRegistry([HistorySink(store: store), push])
        var service = NotificationService(
            validator: NotificationValidator(types: try NotificationTypes(), resources: try ResourceResolver(publicBaseURL: "https://x.example")),
            router: try NotificationRouter(registry: sinks), sinks: sinks, store: store, ids: ids
        )
        service.fanOutPageSize = 100
        let receipt = try await service.send(NotificationSubmission(type: "hot", title: "big", topic: key)).receipt
        #expect(receipt.recipients == subscribers)
        let status = try #require(try await store.status(of: receipt.id))
        #expect(status.deliveries.count == NotificationStatus.deliveryListLimit, "the listing is capped")
        // The pages wrote every subscriber's history row as they routed them (as an accept for
        // users does), so the history deliveries are delivered before the engine runs.
        #expect(status.summary["history"] == [.delivered: subscribers], "the summary counts every delivery")
        #expect(try await store.history(userID: "user-01234", limit: 5, before: nil).items.map(\.notificationID) == [receipt.id])
        let engine = DeliveryEngine(queue: store, sinks: sinks)
        try await engine.drain()
        let counters = try await store.sinkCounters(finishedSince: .distantPast)
        #expect(counters.first { $0.sink == "history" }?.counts == [.delivered: subscribers], "exactly one history delivery per subscriber")
        #expect(push.received.map(\.recipient.userID) == ["user-00007"])
        #expect(try await store.history(userID: "user-02344", limit: 5, before: nil).items.map(\.notificationID) == [receipt.id])
        #expect(try await store.history(userID: "user-00008", limit: 5, before: nil).items.count == 1)
    }
}
