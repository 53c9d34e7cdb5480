import Foundation
import HeraldCore
import HeraldEmulatorSupport
import HeraldFCMEmulator
import HeraldFCMSink
import HeraldStore
import HeraldTestSupport
import Testing

/// The fault bench's short form (docs/durability.md, "A provider that fails part of the time"):
/// the FCM emulator fails in each way a provider under load does, and Herald keeps delivering.
/// Every row: nothing lost (each delivery ends delivered, or dead or failed with its reason),
/// nothing twice (the emulator accepted each message at most once), and progress during the
/// fault. On SQLite, and on PostgreSQL when the tests have a server (`./scripts/test` starts one).
@Suite(.cleansUp) struct FaultMatrixTests {
    struct Row: Sendable, CustomStringConvertible {
        let description: String
        let faults: @Sendable (inout FCMEmulator.Configuration) -> Void
        /// The share of deliveries that must end delivered.
        let deliveredAtLeast: Double
        /// Only a provider that is down opens the circuit; one failing part of the time never does.
        var opensCircuit = false

        static let all: [Row] = [
            // Five attempts each: one in 100 000 fails them all at 10 %, but on a loaded machine an
            // answer late past the request timeout fails an attempt too (a full suite once saw
            // 159 of 160 delivered, the other dead and accounted for).
            Row(description: "10 % of attempts answered 503", faults: { $0.faults.failRate = 0.1 }, deliveredAtLeast: 0.99),
            Row(description: "50 % of attempts answered 503", faults: { $0.faults.failRate = 0.5 }, deliveredAtLeast: 0.9),
            Row(description: "every message failing twice", faults: { $0.failFirst = 2 }, deliveredAtLeast: 1),
            Row(description: "30 % of connections dropped", faults: { $0.faults.resetRate = 0.3 }, deliveredAtLeast: 0.95),
            Row(description: "a 429 storm", faults: { ($0.faults.rateLimitRate, $0.quotaRetryAfter) = (0.5, 1) }, deliveredAtLeast: 0.9),
            Row(description: "half a second of latency", faults: { $0.faults.latency = .milliseconds(500) }, deliveredAtLeast: 1),
            // Started by the test and ended once the circuit has opened, however loaded the machine.
            Row(description: "a full outage, then recovery", faults: { _ in }, deliveredAtLeast: 1, opensCircuit: true),
        ]
    }

    /// The engines the matrix runs on.
    static var engines: [String] { ["sqlite"] + (PostgresTestDatabase.serverURL == nil ? [] : ["postgres"]) }

    @Test(arguments: Row.all, engines)
    func heraldKeepsDeliveringThrough(_ row: Row, engine: String) async throws {
        // Short backoffs and probes, so a row takes seconds; five attempts, as by default.
        var circuit = CircuitConfiguration()
        (circuit.minimumCalls, circuit.probeAfter, circuit.maxProbeInterval) = (10, .milliseconds(500), .seconds(1))
        let f = try await EmulatorFixture.start(
            maxAttempts: 5, backoff: .milliseconds(100), maxConcurrency: 32,
            faults: { configuration in
                var configuration = configuration
                row.faults(&configuration)
                return configuration
            }, circuit: circuit, postgres: engine == "postgres")
        let users = (0..<20).map { "u\($0)" }
        for user in users { try await f.register(user, "tok-\(user)") }
        var ids: [ObjectID] = []
        if row.opensCircuit { f.emulator.outage(for: .seconds(600)) }
        for n in 0..<8 { ids.append(try await f.send(NotificationSubmission(type: "generic", title: "n\(n)", body: "b", userIDs: users))) }
        let working = Task { try await f.deliverAll(timeout: .seconds(120)) }
        if row.opensCircuit {
            let deadline = ContinuousClock.now + .seconds(60)
            while !f.engine.circuits.state(of: f.sink.name).isOpen, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
            #expect(f.engine.circuits.state(of: f.sink.name).isOpen, "the outage opened the circuit")
            f.emulator.outage(for: .zero)
        }
        try await working.value

        var states: [DeliveryState: Int] = [:]
        var unexplained: [String] = []
        for id in ids {
            for delivery in try #require(try await f.store.status(of: id)).deliveries where delivery.sink == f.sink.name {
                states[delivery.state, default: 0] += 1
                if delivery.state != .delivered && (delivery.lastError ?? "").isEmpty { unexplained.append("\(delivery.id)") }
            }
        }
        let total = ids.count * users.count
        #expect(states[.pending, default: 0] == 0, "\(row): lost (still pending): \(states)")
        #expect(states.values.reduce(0, +) == total)
        #expect(unexplained.isEmpty, "\(row): given up without a reason: \(unexplained)")
        #expect(Double(states[.delivered, default: 0]) >= row.deliveredAtLeast * Double(total), "\(row): \(states)")
        // Nothing twice: the emulator accepted each (token, notification) once at most, and as
        // many as Herald recorded delivered.
        var accepted: [String: Int] = [:]
        for item in f.emulator.received where item.status == 200 && !item.validateOnly {
            let message = (try? JSONSerialization.jsonObject(with: item.body) as? [String: Any])?["message"] as? [String: Any]
            let key = "\(message?["token"] as? String ?? "")|\((message?["data"] as? [String: String])?["id"] ?? "")"
            accepted[key, default: 0] += 1
        }
        #expect(accepted.values.allSatisfy { $0 == 1 }, "\(row): delivered twice: \(accepted.filter { $0.value > 1 })")
        #expect(accepted.count == states[.delivered, default: 0], "\(row): \(accepted.count) accepted, \(states[.delivered, default: 0]) recorded")
        let state = f.engine.circuits.state(of: f.sink.name)
        #expect((state.timesOpened > 0) == row.opensCircuit, "\(row): the circuit opened \(state.timesOpened) times")
        #expect(!state.isOpen, "\(row): closed again once the provider recovered")
        if row.description != "half a second of latency" {
            #expect(f.emulator.received.contains { $0.status != 200 }, "\(row): the emulator injected no fault")
        }
        await f.stop()
    }
}
