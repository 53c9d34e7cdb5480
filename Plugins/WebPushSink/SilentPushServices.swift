import Foundation
import Synchronization

/// Push services (by origin, and by address) that took sends and answered none of them within
/// the sink's timeout. A subscription names its push service, so anyone who registers one can
/// point it at a server that accepts connections and never answers; each send there would hold
/// its share of the sink for the whole timeout. After ``strikes`` such sends in a row (any
/// answer resets the count), or one for an origin that has never answered, the origin is held:
/// its sends are retried later without a connection, for 30 s, then twice as long each time it
/// stays silent, up to 10 minutes.
///
/// Origins cost nothing to make (a wildcard DNS record gives one silent server any number of
/// names, and one address any number of ports), so each send is also counted against the
/// addresses its host is known by (``key(address:port:)``), and held while any of them is.
final class SilentPushServices: Sendable {
    private struct Origin {
        var silentInARow = 0
        var holds = 0
        var heldUntil: Date?
    }

    /// Sends without an answer, in a row, before an origin is held. More than one, so a
    /// single lost request to a busy push service does not hold back everyone's pushes to it.
    static let strikes = 3
    static let firstHold: TimeInterval = 30
    static let longestHold: TimeInterval = 600
    /// Origins remembered at once; past it, those not held are forgotten first.
    static let capacity = 10_000

    private struct State {
        var origins: [String: Origin] = [:]
        /// Origins that have answered a send: the real push services are a handful, and keep
        /// answering. A name never heard from is held at its first silence, so someone who
        /// names a new silent host in each subscription gets one timeout per name, not three.
        var answeredBefore: Set<String> = []
    }

    private let state = Mutex(State())

    /// The key a send is counted under for one address of its host: a public address alone,
    /// whatever the port; a loopback or private one (allowed by `allow_private_endpoints`, where
    /// one machine often runs several services) with its port.
    static func key(address: [UInt8], port: Int) -> String {
        let text = PushServiceHost.text(address: address)
        return PushServiceHost.isPrivate(address: address) ? "address \(text) port \(port)" : "address \(text)"
    }

    /// Until when sends counted under `keys` wait (the latest of their holds), or nil when they go out now.
    func heldUntil(anyOf keys: [String], now: Date) -> Date? {
        keys.compactMap { heldUntil($0, now: now) }.max()
    }

    /// A push service known by `keys` answered.
    func answered(_ keys: [String]) {
        for key in keys { answered(key) }
    }

    /// A send counted under `keys` had no answer within the timeout.
    /// - Returns: until when the latest hold this send began lasts, when it began one.
    @discardableResult
    func unanswered(_ keys: [String], now: Date) -> Date? {
        keys.compactMap { unanswered($0, now: now) }.max()
    }

    /// Until when sends to `origin` wait, or nil when they go out now.
    func heldUntil(_ origin: String, now: Date) -> Date? {
        state.withLock { state in
            guard let until = state.origins[origin]?.heldUntil, until > now else { return nil }
            return until
        }
    }

    /// The push service answered (whatever it said).
    func answered(_ origin: String) {
        state.withLock { state in
            if state.origins[origin] != nil { state.origins[origin] = nil }
            guard !state.answeredBefore.contains(origin) else { return }
            if state.answeredBefore.count >= Self.capacity { state.answeredBefore.removeAll() }
            state.answeredBefore.insert(origin)
        }
    }

    /// A send to `origin` had no answer within the timeout.
    /// - Returns: until when the origin is held, when this send made it so.
    @discardableResult
    func unanswered(_ origin: String, now: Date) -> Date? {
        state.withLock { state in
            let strikes = state.answeredBefore.contains(origin) ? Self.strikes : 1
            if state.origins[origin] == nil && state.origins.count >= Self.capacity { Self.forgetSome(&state.origins, now: now) }
            var entry = state.origins[origin] ?? Origin()
            // Sends that went out before the hold began and time out during it change nothing.
            if let until = entry.heldUntil, until > now { return nil }
            entry.silentInARow += 1
            var held: Date?
            if entry.silentInARow >= strikes {
                let hold = min(Self.firstHold * pow(2, Double(min(entry.holds, 10))), Self.longestHold)
                entry.holds += 1
                entry.silentInARow = 0
                held = now.addingTimeInterval(hold)
                entry.heldUntil = held
            }
            state.origins[origin] = entry
            return held
        }
    }

    /// Forgets the origins not held now, and if every one is, those whose holds end first.
    private static func forgetSome(_ origins: inout [String: Origin], now: Date) {
        origins = origins.filter { ($0.value.heldUntil ?? .distantPast) > now }
        guard origins.count >= capacity else { return }
        let soonest = origins.sorted { ($0.value.heldUntil ?? .distantPast) < ($1.value.heldUntil ?? .distantPast) }.prefix(capacity / 10)
        for (origin, _) in soonest { origins[origin] = nil }
    }
}
