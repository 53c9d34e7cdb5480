import Foundation
import HeraldCore
import HeraldHistorySink
import HeraldStore
import HeraldTestSupport
import Synchronization
import Testing

@testable import HeraldCore

/// A sink whose deliveries almost all fail stops being called: its deliveries wait without
/// spending attempts, a round of probes goes out after 30 s (doubling to 5 min), and a round
/// that gets through closes the circuit. A provider that takes some of them keeps it closed.
/// The other sinks are not held up.
@Suite(.cleansUp) struct CircuitBreakerTests {
    final class Clock: Sendable {
        let now = Mutex(Date(timeIntervalSince1970: 1_700_000_000))
        func advance(_ seconds: TimeInterval) { now.withLock { $0 = $0.addingTimeInterval(seconds) } }
        var date: Date { now.withLock { $0 } }
    }

    @Test func aFailingSinkOpensIsProbedAndClosesWithoutSpendingAttempts() async throws {
        let store = try SQLiteStore(path: ":memory:")
        try await store.migrate()
        let clock = Clock()
        let hook = RecordingSink(name: "webhook:down", capabilities: .perUser)
        let other = RecordingSink(name: "webhook:fine", capabilities: .perUser)
        let sinks = try SinkRegistry([HistorySink(store: store, clock: { clock.date }), hook, other])
        var configuration = DeliveryEngineConfiguration()
        configuration.retry = RetryPolicy(maxAttempts: 3, baseDelay: .seconds(1), maxDelay: .seconds(1))
        // Judged after 5 deliveries; one probe at a time, so each round is one delivery.
        configuration.circuit.minimumCalls = 5
        configuration.circuit.probes = 1
        (configuration.circuit.probeAfter, configuration.circuit.maxProbeInterval) = (.seconds(30), .seconds(300))
        let engine = DeliveryEngine(queue: store, sinks: sinks, configuration: configuration, metrics: HeraldMetrics(), clock: { clock.date })
        let ids = ObjectIDGenerator()
        // Every delivery of the first batch fails, and the first probe too.
        hook.script(Array(repeating: .retry(after: nil, reason: "503"), count: 9))
        var notifications: [ObjectID] = []
        for index in 0..<8 {
            let n = HeraldNotification(
                id: ids.next(at: clock.date), type: "violation", title: "T", body: "B", url: nil, timestamp: clock.date, target: .users(["u\(index)"]))
            let planned = [
                PlannedDelivery(sink: "webhook:down", userID: "u\(index)", distribution: .alert),
                PlannedDelivery(sink: "webhook:fine", userID: "u\(index)", distribution: .alert),
            ]
            _ = try await store.accept(n, recipients: 1, deliveries: planned, idempotencySince: clock.date)
            notifications.append(n.id)
        }
        try await engine.drain()
        #expect(other.received.count == 8, "the healthy sink is not held up")
        #expect(hook.received.count == 8, "the first batch was already claimed")
        #expect(engine.circuits.state(of: "webhook:down").isOpen)
        // Retries come due; while open, none is claimed and no attempt is spent.
        clock.advance(5)
        try await engine.drain()
        #expect(hook.received.count == 8, "an open circuit sends nothing")
        let attempts = try await notifications.asyncMap { try await store.status(of: $0)?.deliveries.first { $0.sink == "webhook:down" }?.attempts ?? -1 }
        #expect(attempts.allSatisfy { $0 == 1 }, "waiting spends no attempt: \(attempts)")
        // The probe after 30 s fails (scripted): the next probe waits 60 s.
        clock.advance(26)
        try await engine.drain()
        #expect(hook.received.count == 9, "one probe")
        #expect(engine.circuits.state(of: "webhook:down").isOpen)
        let probed = try await notifications.asyncMap { try await store.status(of: $0)?.deliveries.first { $0.sink == "webhook:down" }?.attempts ?? -1 }
        #expect(probed.allSatisfy { $0 == 1 }, "a probe that failed gave its attempt back: \(probed)")
        clock.advance(30)
        try await engine.drain()
        #expect(hook.received.count == 9, "the interval doubled")
        // The next probe succeeds: the circuit closes and the rest go out.
        clock.advance(31)
        try await engine.drain()
        #expect(!engine.circuits.state(of: "webhook:down").isOpen)
        try await engine.drain()
        #expect(hook.received.count >= 10)
        let states = try await notifications.asyncMap { try await store.status(of: $0)?.deliveries.first { $0.sink == "webhook:down" }?.state }
        #expect(states.allSatisfy { $0 == .delivered }, "nothing failed because the sink was down: \(states)")
        #expect(engine.circuits.state(of: "webhook:down").timesOpened == 1)
    }

    /// The circuit judges a window's success rate, not failures in a row: a provider that takes
    /// one message in ten is slow to accept, not down, and stays in use; one that takes none of
    /// the minimum number of calls is down.
    @Test func aProviderThatTakesSomeMessagesKeepsItsCircuitClosed() {
        var configuration = CircuitConfiguration()
        (configuration.window, configuration.minimumCalls, configuration.successFloor) = (100, 20, 0.05)
        let circuits = CircuitBreakers(configuration: configuration)
        let now = Date()
        let failure = DeliveryOutcome.retry(after: nil, reason: "connection refused", scope: .provider)
        for _ in 0..<30 {
            // Nine failures in a row, then one delivered: 10 %, over the floor.
            #expect(circuits.observe("fcm", outcomes: Array(repeating: failure, count: 9) + [.delivered], at: now) == false)
        }
        #expect(!circuits.state(of: "fcm").isOpen && circuits.state(of: "fcm").judged == 100)
        #expect(abs(circuits.state(of: "fcm").failureRate - 0.9) < 0.001)
        // Below the minimum number of calls, even all failing is not judged.
        #expect(circuits.observe("apns", outcomes: Array(repeating: failure, count: 19), at: now) == false)
        #expect(circuits.observe("apns", outcomes: [failure], at: now), "20 of 20 failed: down")
        let open = circuits.state(of: "apns")
        #expect(open.isOpen && open.reason?.contains("0 of its last 20 deliveries got through") == true, "\(open.reason ?? "")")
    }

    /// Half-open lets a round of probes through and closes on their success rate.
    @Test func aRoundOfProbesClosesTheCircuitWhenSomeGetThrough() {
        var configuration = CircuitConfiguration()
        (configuration.minimumCalls, configuration.probes) = (5, 4)
        let circuits = CircuitBreakers(configuration: configuration)
        let now = Date()
        let failure = DeliveryOutcome.retry(after: nil, reason: "reset", scope: .provider)
        #expect(circuits.observe("hook", outcomes: Array(repeating: failure, count: 5), at: now))
        #expect(circuits.probesDue(at: now.addingTimeInterval(31)) == ["hook"])
        circuits.probesClaimed("hook", count: 4)
        #expect(circuits.observe("hook", outcomes: [failure, failure], at: now) == false)
        #expect(circuits.state(of: "hook").isOpen, "half the round is not in yet")
        #expect(circuits.observe("hook", outcomes: [failure, .delivered], at: now) == false)
        #expect(!circuits.state(of: "hook").isOpen, "one of four got through: closed")

        // A provider back up but answering 503 for single messages (scoped to the message):
        // it answers, so its probes complete the round and close the circuit.
        #expect(circuits.observe("fcm", outcomes: Array(repeating: failure, count: 5), at: now))
        #expect(circuits.probesDue(at: now.addingTimeInterval(31)) == ["fcm"])
        circuits.probesClaimed("fcm", count: 2)
        let answered = DeliveryOutcome.retry(after: nil, reason: "503 UNAVAILABLE", scope: .message)
        #expect(circuits.observe("fcm", outcomes: [answered, answered], at: now) == false)
        #expect(!circuits.state(of: "fcm").isOpen, "probes answered 503 left the circuit stuck open")
    }

    /// A failure about one message or one address (a device's own rate limit, a subscription's
    /// push service) says nothing of the provider: however many, it never opens the circuit.
    @Test func onlyFailuresScopedToTheProviderOpenTheCircuit() {
        let circuits = CircuitBreakers()
        let now = Date()
        for scope in [OutcomeScope.message, .recipient] {
            let outcomes = Array(repeating: DeliveryOutcome.retry(after: nil, reason: "429", scope: scope), count: 50)
            #expect(circuits.observe("apns", outcomes: outcomes, at: now) == false, "\(scope)")
            #expect(!circuits.state(of: "apns").isOpen && circuits.state(of: "apns").judged == 0)
        }
        for scope in [OutcomeScope.provider, .credentials] {
            let outcomes = Array(repeating: DeliveryOutcome.retry(after: nil, reason: "no answer", scope: scope), count: 20)
            #expect(circuits.observe(scope.rawValue, outcomes: outcomes, at: now), "\(scope) opens it")
        }
    }

    /// Circuits kept per endpoint (Web Push's push services) hold only their own endpoint's
    /// deliveries: once due, a round of probes is admitted one delivery at a time up to
    /// `probes`, the rest wait until about when the next round would be due, and a round that
    /// gets through closes the endpoint's circuit. Another endpoint of the same sink, and the
    /// sink's own circuit, are untouched throughout.
    @Test func anEndpointsCircuitHoldsOnlyItsOwnDeliveries() {
        var configuration = CircuitConfiguration()
        (configuration.minimumCalls, configuration.probes, configuration.probeAfter) = (5, 2, .seconds(2))
        let circuits = CircuitBreakers(configuration: configuration)
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let refused = DeliveryOutcome.retry(after: nil, reason: "connection refused", scope: .provider)
        #expect(circuits.observe("https://down.example", of: "webpush", outcomes: Array(repeating: refused, count: 5), at: now))
        #expect(circuits.admit("https://up.example", of: "webpush", at: now) == .send, "another endpoint goes on")
        #expect(!circuits.state(of: "webpush").isOpen && circuits.openSinks().isEmpty, "the sink's own circuit is not the endpoint's")
        guard case .wait(let until, let reason) = circuits.admit("https://down.example", of: "webpush", at: now) else {
            Issue.record("an open endpoint's delivery went out")
            return
        }
        #expect(until == now.addingTimeInterval(2) && reason.contains("the circuit for https://down.example is open"), "\(until) \(reason)")
        // The round: two probes, then the rest wait.
        let due = now.addingTimeInterval(2)
        #expect(circuits.admit("https://down.example", of: "webpush", at: due) == .send)
        #expect(circuits.admit("https://down.example", of: "webpush", at: due) == .send)
        #expect(circuits.admit("https://down.example", of: "webpush", at: due) != .send, "two probes a round")
        // Both fail: the round failed, the next waits twice as long.
        #expect(circuits.observe("https://down.example", of: "webpush", outcomes: [refused, refused], at: due) == false)
        #expect(circuits.state(of: "https://down.example", of: "webpush").nextProbeAt == due.addingTimeInterval(4))
        #expect(circuits.admit("https://down.example", of: "webpush", at: due.addingTimeInterval(3)) != .send)
        // The next round gets through: closed, everything goes.
        let next = due.addingTimeInterval(4)
        #expect(circuits.admit("https://down.example", of: "webpush", at: next) == .send)
        #expect(circuits.observe("https://down.example", of: "webpush", outcomes: [.delivered], at: next) == false)
        #expect(!circuits.state(of: "https://down.example", of: "webpush").isOpen)
        #expect(circuits.admit("https://down.example", of: "webpush", at: next) == .send)
        #expect(circuits.openEndpoints(of: "webpush").isEmpty)
    }

    /// A round of probes whose answers never come (a sink that gave no outcome) is given up, so
    /// the circuit is probed again instead of staying open for good.
    @Test func aRoundOfProbesThatIsNeverAnsweredIsGivenUp() {
        var configuration = CircuitConfiguration()
        (configuration.minimumCalls, configuration.probes) = (5, 1)
        let circuits = CircuitBreakers(configuration: configuration)
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let refused = DeliveryOutcome.retry(after: nil, reason: "reset", scope: .provider)
        #expect(circuits.observe("hook", outcomes: Array(repeating: refused, count: 5), at: now))
        #expect(circuits.probesDue(at: now.addingTimeInterval(3)) == ["hook"])
        circuits.probesClaimed("hook", count: 1)
        #expect(circuits.probesDue(at: now.addingTimeInterval(60)).isEmpty, "its probe is still out")
        #expect(circuits.probesDue(at: now.addingTimeInterval(200)) == ["hook"], "a round never answered is given up")
        #expect(circuits.observe("https://a.example", of: "webpush", outcomes: Array(repeating: refused, count: 5), at: now))
        #expect(circuits.admit("https://a.example", of: "webpush", at: now.addingTimeInterval(3)) == .send)
        #expect(circuits.admit("https://a.example", of: "webpush", at: now.addingTimeInterval(60)) != .send)
        #expect(circuits.admit("https://a.example", of: "webpush", at: now.addingTimeInterval(200)) == .send)
    }
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
