public import Foundation
import Synchronization

/// When a sink's circuit opens and how it is probed (docs/durability.md, "A sink that is down").
public struct CircuitConfiguration: Sendable, Equatable {
    /// The last deliveries a circuit judges by (only those whose outcome says something of the
    /// provider: delivered, or failed with scope `provider` or `credentials`).
    public var window = 100
    /// Deliveries in the window before it is judged at all.
    public var minimumCalls = 20
    /// The circuit opens when fewer than this share of the window was delivered: the provider is
    /// down, not slow to accept. A provider that takes some messages keeps its circuit closed,
    /// each failed message waiting its own backoff.
    public var successFloor = 0.05
    /// Deliveries let through at once while the circuit is half-open; it closes when at least
    /// `successFloor` of them (and at least one) is delivered.
    public var probes = 10
    /// The first probes go out this long after the circuit opens; each failed round doubles it.
    /// Short, so a provider that comes back is sending again within seconds (a probe round
    /// that fails costs no attempt: ``DeliveryUpdate/givesBackAttempt``).
    public var probeAfter: Duration = .seconds(2)
    /// The longest the wait between probe rounds grows to.
    public var maxProbeInterval: Duration = .seconds(8)

    /// The defaults `delivery.circuit` starts from.
    public init() {}
}

/// A circuit per sink, owned by the delivery engine: when almost nothing of a sink's recent
/// deliveries gets through (``CircuitConfiguration/successFloor`` over
/// ``CircuitConfiguration/window``), its deliveries stay pending, untouched (no attempt is spent:
/// nothing fails because the provider is down), until a round of probes is delivered. Failures
/// about one message or one recipient never count. Other sinks are never held up by it.
public final class CircuitBreakers: Sendable {
    /// One sink's circuit, as `herald sinks`, the portal and /metrics show it.
    public struct State: Sendable, Equatable {
        /// The window, oldest first: true for a delivery, false for a failure that counts.
        var recent: [Bool] = []
        /// When the circuit opened; nil while closed.
        public var openedAt: Date?
        /// Why it opened, in words an operator can act on.
        public var reason: String?
        /// When the next round of probes may go out (while open).
        public var nextProbeAt: Date?
        /// How long the circuit waits before the next round.
        public var probeInterval: Duration = .zero
        /// Probe deliveries claimed and not yet answered, and the answers so far.
        var probesOutstanding = 0
        var probeResults: [Bool] = []
        /// When the current round of probes began (``abandonStaleRound(_:at:)``).
        var probesStartedAt: Date?
        /// How often this circuit has opened.
        public var timesOpened = 0

        /// Whether the circuit is open (or half-open, probing).
        public var isOpen: Bool { openedAt != nil }
        var probing: Bool { probesOutstanding > 0 }

        /// Deliveries in the window and the share of them that failed (0 with none).
        public var judged: Int { recent.count }
        /// The share of ``judged`` deliveries that failed.
        public var failureRate: Double { recent.isEmpty ? 0 : Double(recent.filter { !$0 }.count) / Double(recent.count) }

        /// A closed circuit that has never failed.
        public init() {}

        init(timesOpened: Int) { self.timesOpened = timesOpened }
    }

    private let configuration: CircuitConfiguration
    private let states = Mutex<[String: State]>([:])
    /// Circuits per (sink, endpoint) for sinks whose devices each name their own service.
    private let endpoints = Mutex<[EndpointKey: State]>([:])

    private struct EndpointKey: Hashable {
        var sink: String
        var endpoint: String
    }

    /// Every sink's circuit closed.
    public init(configuration: CircuitConfiguration = .init()) {
        self.configuration = configuration
    }

    /// Deliveries let through at once while half-open.
    var probeBatch: Int { max(1, configuration.probes) }

    /// `sink`'s circuit now; a sink never judged has a closed one.
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

    /// The open sinks whose probes are due at `now`; each is marked as probing (with one probe
    /// outstanding until ``probesClaimed(_:count:)`` says how many were claimed).
    func probesDue(at now: Date) -> [String] {
        states.withLock { states in
            var due: [String] = []
            for sink in states.keys {
                guard var state = states[sink], state.isOpen else { continue }
                if startRoundIfDue(&state, at: now) { due.append(sink) }
                states[sink] = state
            }
            return due.sorted()
        }
    }

    /// How many probe deliveries went out for `sink`; none: try again once one is due.
    func probesClaimed(_ sink: String, count: Int) {
        states.withLock { $0[sink]?.probesOutstanding = max(0, count) }
    }

    /// The earliest probe still to come, for an idle worker's wait.
    func nextProbe() -> Date? {
        states.withLock { $0.values.filter { $0.isOpen && !$0.probing }.compactMap(\.nextProbeAt).min() }
    }

    /// Counts a sink's outcomes, in order. - Returns: true when this opened the circuit.
    @discardableResult
    func observe(_ sink: String, outcomes: [DeliveryOutcome], at now: Date) -> Bool {
        states.withLock { states in
            var state = states[sink] ?? State()
            defer { states[sink] = state }
            return judge(&state, outcomes, at: now)
        }
    }

    /// Counts outcomes into `state`, opening it, or closing or reopening it at the end of a
    /// round of probes. - Returns: true when this opened the circuit.
    private func judge(_ state: inout State, _ outcomes: [DeliveryOutcome], at now: Date) -> Bool {
        if state.probing {
            // Every answer completes a probe; one about a message or a recipient (a 503 for
            // this message) shows the provider answering, so it counts as getting through.
            state.probeResults += outcomes.map { Self.counts($0) ?? true }
            guard state.probeResults.count >= state.probesOutstanding else { return false }
            let delivered = state.probeResults.filter { $0 }.count
            if delivered > 0 && Double(delivered) >= configuration.successFloor * Double(state.probeResults.count) {
                state = State(timesOpened: state.timesOpened)
            } else {
                let doubled = state.probeInterval * 2
                state.probeInterval = doubled > configuration.maxProbeInterval ? configuration.maxProbeInterval : doubled
                state.nextProbeAt = now.addingTimeInterval(state.probeInterval.seconds)
                state.reason = "its probes were not delivered either (\(delivered) of \(state.probeResults.count))"
                (state.probesOutstanding, state.probeResults) = (0, [])
            }
            return false
        }
        let counted = outcomes.compactMap(Self.counts)
        guard !counted.isEmpty else { return false }
        state.recent += counted
        if state.recent.count > max(1, configuration.window) { state.recent.removeFirst(state.recent.count - max(1, configuration.window)) }
        guard !state.isOpen, state.recent.count >= max(1, configuration.minimumCalls) else { return false }
        let delivered = state.recent.filter { $0 }.count
        guard Double(delivered) < configuration.successFloor * Double(state.recent.count) else { return false }
        state.openedAt = now
        state.reason = "\(delivered) of its last \(state.recent.count) deliveries got through (the floor is \(Self.percent(configuration.successFloor)))"
        state.probeInterval = configuration.probeAfter
        state.nextProbeAt = now.addingTimeInterval(configuration.probeAfter.seconds)
        state.timesOpened += 1
        state.recent = []
        return true
    }

    /// A round of probes whose answers never all came (a sink that gave no outcome for some,
    /// or storage that failed while they were recorded) is given up after two minutes, longer
    /// than any provider's answer takes, so the circuit is probed again rather than held forever.
    private func abandonStaleRound(_ state: inout State, at now: Date) {
        guard state.probing, let started = state.probesStartedAt, now.timeIntervalSince(started) > 120 else { return }
        (state.probesOutstanding, state.probeResults, state.probesStartedAt) = (0, [], nil)
    }

    /// Starts a round of probes on an open circuit whose probes are due (giving up a stale
    /// round first), with one probe outstanding. - Returns: whether a round started.
    private func startRoundIfDue(_ state: inout State, at now: Date) -> Bool {
        abandonStaleRound(&state, at: now)
        guard !state.probing, (state.nextProbeAt ?? now) <= now else { return false }
        (state.probesOutstanding, state.probeResults, state.probesStartedAt) = (1, [], now)
        return true
    }

    // MARK: Endpoints

    /// Whether one delivery to an endpoint of a sink whose devices each name their own service
    /// goes out now: the endpoint's circuit is closed, or this is one of a round of probes; or
    /// waits until `until`, its attempt given back.
    enum Admission: Equatable {
        case send
        case wait(until: Date, reason: String)
    }

    /// Admits or holds one delivery to `endpoint` of `sink` (``Admission``). A round of probes
    /// is the first ``probeBatch`` deliveries admitted once its probes are due; a round whose
    /// answers never all came is given up (``startRoundIfDue(_:at:)``).
    func admit(_ endpoint: String, of sink: String, at now: Date) -> Admission {
        endpoints.withLock { endpoints in
            let key = EndpointKey(sink: sink, endpoint: endpoint)
            guard var state = endpoints[key], state.isOpen else { return .send }
            defer { endpoints[key] = state }
            if startRoundIfDue(&state, at: now) { return .send }
            if state.probing, state.probeResults.isEmpty, state.probesOutstanding < probeBatch {
                state.probesOutstanding += 1
                return .send
            }
            // While a round is out, until about when the next would be due; else the next round.
            let until = state.probing ? now.addingTimeInterval(max(state.probeInterval.seconds, 1)) : state.nextProbeAt ?? now.addingTimeInterval(1)
            return .wait(until: until, reason: "the circuit for \(endpoint) is open: \(state.reason ?? "its deliveries fail")")
        }
    }

    /// Counts the outcomes of deliveries to one endpoint of a sink. - Returns: true when this
    /// opened the endpoint's circuit.
    @discardableResult
    func observe(_ endpoint: String, of sink: String, outcomes: [DeliveryOutcome], at now: Date) -> Bool {
        endpoints.withLock { endpoints in
            let key = EndpointKey(sink: sink, endpoint: endpoint)
            var state = endpoints[key] ?? State()
            let opened = judge(&state, outcomes, at: now)
            endpoints[key] = state
            // Closed circuits with nothing against them are forgotten first, so a sink with
            // endpoints beyond count keeps a bounded map.
            if endpoints.count > Self.endpointLimit {
                for (other, remembered) in endpoints where other != key && !remembered.isOpen { endpoints[other] = nil }
            }
            return opened
        }
    }

    /// The endpoints of `sink` whose circuits are open, by endpoint.
    public func openEndpoints(of sink: String) -> [(endpoint: String, state: State)] {
        endpoints.withLock { endpoints in
            endpoints.filter { $0.key.sink == sink && $0.value.isOpen }.map { ($0.key.endpoint, $0.value) }.sorted { $0.endpoint < $1.endpoint }
        }
    }

    /// The state of one endpoint's circuit (closed when never seen).
    public func state(of endpoint: String, of sink: String) -> State {
        endpoints.withLock { $0[EndpointKey(sink: sink, endpoint: endpoint)] ?? State() }
    }

    /// Endpoint circuits kept at once; past it, closed ones are forgotten.
    static let endpointLimit = 4096

    /// Whether an outcome says something of the provider: delivered (true), failed for the
    /// provider or the credentials (false); nil for a failure about one message or recipient.
    static func counts(_ outcome: DeliveryOutcome) -> Bool? {
        switch outcome {
        case .delivered: true
        case .retry(_, _, let scope): scope.countsAgainstProvider ? false : nil
        case .failed, .recipientGone: nil
        }
    }

    static func percent(_ share: Double) -> String {
        let value = share * 100
        return value.rounded() == value ? "\(Int(value)) %" : String(format: "%.1f %%", value)
    }
}
