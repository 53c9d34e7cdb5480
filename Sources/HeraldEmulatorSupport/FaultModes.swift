public import Foundation
import Synchronization

/// How an emulator fails, as a provider under load does (docs/durability.md, "A provider that
/// fails part of the time"): each send, independently, may be answered 503 (`failRate`), 429 with
/// `Retry-After` (`rateLimitRate`), or lose its connection with no answer (`resetRate`); an
/// answer may come late (`latency`, for the share `latencyRate` of sends, by default every one);
/// and for `outageFor` from the first send (or from
/// ``FaultInjector/outage(for:)``) every send loses its connection.
public struct FaultModes: Sendable {
    public var failRate = 0.0
    public var rateLimitRate = 0.0
    public var resetRate = 0.0
    public var latency: Duration = .zero
    public var latencyRate = 1.0
    public var outageFor: Duration = .zero

    public init() {}
}

/// What a send meets.
public enum InjectedFault: Sendable, Equatable {
    /// The connection goes, with no answer.
    case drop
    /// 503, the provider's "unavailable".
    case unavailable
    /// 429 with `Retry-After`.
    case rateLimited
}

/// Draws each send's fault from ``FaultModes`` and keeps the outage's clock.
public final class FaultInjector: Sendable {
    public let modes: FaultModes
    private let outageUntil = Mutex<ContinuousClock.Instant?>(nil)

    public init(_ modes: FaultModes) {
        self.modes = modes
    }

    /// Every send loses its connection for `duration` from now (zero ends an outage).
    public func outage(for duration: Duration) {
        outageUntil.withLock { $0 = ContinuousClock.now + duration }
    }

    /// Waits ``FaultModes/latency`` (for the share ``FaultModes/latencyRate`` of sends), then
    /// says what this send meets (nil: it is answered as usual).
    public func next() async throws -> InjectedFault? {
        if modes.latency > .zero, modes.latencyRate >= 1 || Double.random(in: 0..<1) < modes.latencyRate { try await Task.sleep(for: modes.latency) }
        let now = ContinuousClock.now
        let outage = outageUntil.withLock { until -> Bool in
            if until == nil, modes.outageFor > .zero { until = now + modes.outageFor }
            return until.map { now < $0 } ?? false
        }
        if outage { return .drop }
        let draw = Double.random(in: 0..<1)
        if draw < modes.resetRate { return .drop }
        if draw < modes.resetRate + modes.failRate { return .unavailable }
        if draw < modes.resetRate + modes.failRate + modes.rateLimitRate { return .rateLimited }
        return nil
    }
}
