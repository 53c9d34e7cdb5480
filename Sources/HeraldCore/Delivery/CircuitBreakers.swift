public import Foundation
import Synchronization

/// When a sink's circuit opens and how it is probed.
public struct CircuitConfiguration: Sendable, Equatable {
    /// Consecutive failed deliveries (transient: 5xx, timeouts, refused connections, 410) that
    /// open a sink's circuit.
    public var failures = 5
    /// The first probe goes out this long after the circuit opens; each failed probe doubles it.
    public var probeAfter: Duration = .seconds(30)
    public var maxProbeInterval: Duration = .seconds(300)

    public init() {}
}

/// A circuit per sink, owned by the delivery engine: after `failures` consecutive failures a
/// sink's deliveries stay pending, untouched (no attempt is spent: nothing fails because the
/// sink is down), until one probe delivery succeeds. Other sinks are never held up by it.
public final class CircuitBreakers: Sendable {
    /// One sink's circuit, as `herald sinks`, the portal and /metrics show it.
    public struct State: Sendable, Equatable {
        public var consecutiveFailures = 0
        /// When the circuit opened; nil while closed.
        public var openedAt: Date?
        /// When the next probe may go out (while open).
        public var nextProbeAt: Date?
        /// How long the circuit waits before the next probe.
        public var probeInterval: Duration = .zero
        var probing = false
        /// How often this circuit has opened.
        public var timesOpened = 0

        public var isOpen: Bool { openedAt != nil }

        /// A closed circuit that has never failed.
        public init() {}

        init(timesOpened: Int) { self.timesOpened = timesOpened }
    }

    private let configuration: CircuitConfiguration
    private let states = Mutex<[String: State]>([:])

    public init(configuration: CircuitConfiguration = .init()) {
        self.configuration = configuration
    }

    public func state(of sink: String) -> State {
        states.withLock { $0[sink] ?? State() }
    }

    /// Whether `sink`'s deliveries must not be claimed now (open, including while probed).
    func isOpen(_ sink: String) -> Bool {
        states.withLock { $0[sink]?.isOpen ?? false }
    }

    /// Sinks whose deliveries must not be claimed now (open, including those being probed).
    func openSinks() -> Set<String> {
        states.withLock { Set($0.filter { $0.value.isOpen }.keys) }
    }

    /// The open sinks whose probe is due at `now`; each is marked as probing.
    func probesDue(at now: Date) -> [String] {
        states.withLock { states in
            var due: [String] = []
            for (sink, state) in states where state.isOpen && !state.probing && (state.nextProbeAt ?? now) <= now {
                states[sink]?.probing = true
                due.append(sink)
            }
            return due.sorted()
        }
    }

    /// The earliest probe still to come, for an idle worker's wait.
    func nextProbe() -> Date? {
        states.withLock { $0.values.filter { $0.isOpen && !$0.probing }.compactMap(\.nextProbeAt).min() }
    }

    /// A probe found nothing to send: try again once the next delivery is due.
    func probeSkipped(_ sink: String) {
        states.withLock { $0[sink]?.probing = false }
    }

    /// Counts a sink's outcomes, in order. - Returns: true when this opened the circuit.
    @discardableResult
    func observe(_ sink: String, outcomes: [DeliveryOutcome], at now: Date) -> Bool {
        states.withLock { states in
            var state = states[sink] ?? State()
            defer { states[sink] = state }
            if state.probing {
                state.probing = false
                if outcomes.contains(.delivered) {
                    state = State(timesOpened: state.timesOpened)
                } else {
                    let doubled = state.probeInterval * 2
                    state.probeInterval = doubled > configuration.maxProbeInterval ? configuration.maxProbeInterval : doubled
                    state.nextProbeAt = now.addingTimeInterval(state.probeInterval.seconds)
                }
                return false
            }
            var opened = false
            for outcome in outcomes {
                switch outcome {
                case .delivered:
                    state.consecutiveFailures = 0
                case .retry(_, _, let scope) where !scope.countsAgainstProvider:
                    // One message or one address (a 429 for this message, a subscription's own
                    // push service): says nothing of the provider.
                    break
                case .retry:
                    state.consecutiveFailures += 1
                    if !state.isOpen && state.consecutiveFailures >= configuration.failures {
                        state.openedAt = now
                        state.probeInterval = configuration.probeAfter
                        state.nextProbeAt = now.addingTimeInterval(configuration.probeAfter.seconds)
                        state.timesOpened += 1
                        opened = true
                    }
                case .failed, .recipientGone:
                    // About one delivery (a payload, a token), not about the sink.
                    break
                }
            }
            return opened
        }
    }
}
