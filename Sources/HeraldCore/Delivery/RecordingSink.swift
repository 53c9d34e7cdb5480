import Synchronization

/// An in-memory sink that records what it is given and answers with scripted outcomes.
/// Ships beside the real sinks so tests and embedders can watch routing without a network.
public final class RecordingSink: NotificationSink {
    public let name: String
    public let capabilities: SinkCapabilities
    private let state = Mutex<State>(State())

    struct State {
        var received: [Delivery] = []
        var script: [DeliveryOutcome] = []
    }

    public init(name: String, capabilities: SinkCapabilities) {
        self.name = name
        self.capabilities = capabilities
    }

    /// Outcomes handed out in order to the next deliveries; `.delivered` once it runs out.
    public func script(_ outcomes: [DeliveryOutcome]) {
        state.withLock { $0.script.append(contentsOf: outcomes) }
    }

    public var received: [Delivery] { state.withLock { $0.received } }

    public func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] {
        state.withLock { state in
            state.received.append(contentsOf: batch)
            return batch.map { _ in state.script.isEmpty ? .delivered : state.script.removeFirst() }
        }
    }
}
