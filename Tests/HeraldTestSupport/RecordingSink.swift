public import HeraldCore
import Synchronization

/// An in-memory sink that records what it is given and answers with scripted outcomes, so
/// tests can watch routing without a network.
public final class RecordingSink: NotificationSink {
    public let name: String
    public let capabilities: SinkCapabilities
    public let providers: DeviceProviders
    public let channel: SinkChannel
    private let state = Mutex<State>(State())

    struct State {
        var received: [Delivery] = []
        var events: [EngagementEvent] = []
        var script: [DeliveryOutcome] = []
        var health: SinkHealth = .ok
    }

    /// - Parameter providers: for a push sink, the device providers it takes (every one by default).
    /// - Parameter channel: the channel it delivers on; by default as a sink of its capabilities.
    public init(name: String, capabilities: SinkCapabilities, providers: DeviceProviders = .all, channel: SinkChannel? = nil) {
        self.name = name
        self.capabilities = capabilities
        self.providers = providers
        self.channel = channel ?? SinkChannel.byDefault(name: name, capabilities: capabilities)
    }

    /// Outcomes handed out in order to the next deliveries; `.delivered` once it runs out.
    public func script(_ outcomes: [DeliveryOutcome]) {
        state.withLock { $0.script.append(contentsOf: outcomes) }
    }

    /// What ``health()`` reports from now on.
    public func report(_ health: SinkHealth) {
        state.withLock { $0.health = health }
    }

    public var received: [Delivery] { state.withLock { $0.received } }

    public var events: [EngagementEvent] { state.withLock { $0.events } }

    public func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] {
        state.withLock { state in
            state.received.append(contentsOf: batch)
            return batch.map { _ in state.script.isEmpty ? .delivered : state.script.removeFirst() }
        }
    }

    public func deliverEvents(_ events: [EngagementEvent]) async -> [DeliveryOutcome] {
        state.withLock { $0.events.append(contentsOf: events) }
        return events.map { _ in .delivered }
    }

    public func health() async -> SinkHealth { state.withLock { $0.health } }
}
