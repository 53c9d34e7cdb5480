import Foundation
import HeraldCore
import HeraldTestSupport
import Logging
import Synchronization
import Testing

@testable import HeraldCards

/// Engagement events go to every sink that takes them, each sink with its own bound on the
/// batches waiting for it: one receiver that stalls loses its own events (they are stored),
/// not the others'.
@Suite struct EventForwarderTests {
    /// Takes events; when `stalls`, answers only once released.
    final class EventSink: NotificationSink {
        let name: String
        let capabilities: SinkCapabilities = [.perUser, .events]
        let stalls: Bool
        private let state = Mutex((released: false, received: [String]()))

        init(name: String, stalls: Bool) {
            self.name = name
            self.stalls = stalls
        }

        var received: [String] { state.withLock { $0.received } }
        func release() { state.withLock { $0.released = true } }

        func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] { batch.map { _ in .delivered } }

        func deliverEvents(_ events: [EngagementEvent]) async -> [DeliveryOutcome] {
            state.withLock { $0.received += events.map(\.eventID) }
            while stalls && !state.withLock({ $0.released }) { try? await Task.sleep(for: .milliseconds(5)) }
            return events.map { _ in .delivered }
        }
    }

    static func event(_ id: String) -> EngagementEvent {
        EngagementEvent(eventID: id, userID: "u1", type: "reaction", reaction: "ctfo", card: "c1", properties: [:], at: Date())
    }

    @Test func aStalledSinkDoesNotStopTheOthers() async throws {
        let stalled = EventSink(name: "stalled", stalls: true)
        let taking = EventSink(name: "taking", stalls: false)
        let forwarder = EventForwarder(sinks: [stalled, taking], logger: Logger(label: "t"), maxInFlight: 2, retryDelays: [])
        for index in 0..<5 {
            forwarder.forward([Self.event("e\(index)")])
            // One batch at a time, so the taking sink is never behind itself.
            for _ in 0..<1_000 where taking.received.count <= index { try await Task.sleep(for: .milliseconds(5)) }
        }
        #expect(taking.received == ["e0", "e1", "e2", "e3", "e4"], "every batch reached the sink that takes them")
        #expect(stalled.received == ["e0", "e1"], "the stalled sink gets two batches, its bound, and no more")
        stalled.release()
        for _ in 0..<1_000 where forwarder.waiting(for: 0) > 0 { try await Task.sleep(for: .milliseconds(5)) }
        forwarder.forward([Self.event("e5")])
        for _ in 0..<1_000 where stalled.received.count < 3 { try await Task.sleep(for: .milliseconds(5)) }
        #expect(stalled.received == ["e0", "e1", "e5"], "once it answers it takes batches again")
    }
}
