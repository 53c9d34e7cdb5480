public import Foundation
import Synchronization

/// Deliveries leased to this process's ``DeliveryEngine`` by the transaction that accepts them.
///
/// Without it a delivery is stored pending, and a worker then claims it (a write that leases
/// the row and reads it back with its notification and device) before the sink sees it. An
/// accept that hands off stores the delivery already leased, with its first attempt counted,
/// exactly as a claim would leave it, and queues it here: the claim's transaction, its fsync
/// and its read are skipped, and a worker that was idle sends at once. The lease keeps every
/// guarantee a claim gives: if this process dies, the delivery is due again when the lease
/// runs out, for any process's workers.
///
/// Bounded: once `capacity` deliveries wait (a slow sink), accepts store pending deliveries
/// as before, and a sink whose circuit is open is never handed anything.
public final class DeliveryHandOff: Sendable {
    private struct State {
        var queued: [Delivery] = []
        var closed = false
    }

    /// How long a handed-off delivery is leased for (the engine's lease).
    public let lease: Duration
    /// Deliveries that may wait at once; one accept batch may go past it.
    public let capacity: Int
    private let state = Mutex(State())
    private let admitsSink: @Sendable (String) -> Bool

    /// - Parameters:
    ///   - capacity: deliveries the hand-off holds at most; more are left for workers to claim.
    ///   - lease: how long a handed-off delivery is leased, as a claim's lease is.
    ///   - admits: whether a delivery to the named sink may be handed off now (the engine says
    ///     no for a sink whose circuit is open).
    public init(capacity: Int, lease: Duration, admits: @escaping @Sendable (String) -> Bool = { _ in true }) {
        self.capacity = max(1, capacity)
        self.lease = lease
        self.admitsSink = admits
    }

    /// Whether an accept may store a delivery to `sink` leased and hand it off.
    public func admits(sink: String) -> Bool {
        let open = state.withLock { !$0.closed && $0.queued.count < capacity }
        return open && admitsSink(sink)
    }

    /// The lease a handed-off delivery is stored with, from the moment it is accepted.
    public func leaseEnd(from now: Date) -> Date {
        now.addingTimeInterval(lease.seconds)
    }

    /// Queues deliveries whose accept has committed, leased until ``leaseEnd(from:)``. Once the
    /// engine has stopped they are dropped here: their leases run out and they are claimed like
    /// any other delivery.
    public func hand(_ deliveries: [Delivery]) {
        guard !deliveries.isEmpty else { return }
        state.withLock { state in
            if !state.closed { state.queued += deliveries }
        }
    }

    /// Up to `limit` queued deliveries, oldest first (the engine's workers take them). Those to
    /// a sink in `held` (one given as many deliveries as it may have at once) stay queued, their
    /// leases kept, until a worker takes them later.
    public func take(max limit: Int, skipping held: Set<String> = []) -> [Delivery] {
        state.withLock { state in
            guard !held.isEmpty else {
                let taken = Array(state.queued.prefix(max(0, limit)))
                state.queued.removeFirst(taken.count)
                return taken
            }
            var taken: [Delivery] = []
            var kept: [Delivery] = []
            for delivery in state.queued {
                if taken.count < limit && !held.contains(delivery.sink) { taken.append(delivery) } else { kept.append(delivery) }
            }
            state.queued = kept
            return taken
        }
    }

    /// Drops the waiting deliveries that `withdrawn` picks: their rows were failed (a device
    /// removed or moved to another user, a user erased), but a worker would still send these
    /// copies, as they are sent without reading the row again. One a worker has taken already
    /// may still go, as one it had just claimed may. - Returns: how many were dropped.
    @discardableResult
    public func withdraw(where withdrawn: (Delivery) -> Bool) -> Int {
        state.withLock { state in
            let before = state.queued.count
            state.queued.removeAll(where: withdrawn)
            return before - state.queued.count
        }
    }

    /// The leases of the deliveries still waiting, for the engine's heartbeat.
    var queuedLeases: [DeliveryLease] {
        state.withLock { $0.queued.map { DeliveryLease(id: $0.id, attempt: $0.attempt) } }
    }

    /// Deliveries waiting for a worker now.
    public var count: Int { state.withLock { $0.queued.count } }

    /// Stops admitting and returns what still waits, for the engine to give back at shutdown.
    func close() -> [Delivery] {
        state.withLock { state in
            state.closed = true
            defer { state.queued.removeAll() }
            return state.queued
        }
    }
}

extension HeraldNotification {
    /// The notification as a store gives it back: times kept to the microsecond, as stored.
    /// A handed-off delivery carries this, so a sink sees the same values whether the delivery
    /// was handed off or claimed.
    public var asStored: HeraldNotification {
        var stored = self
        stored.timestamp = Timestamp.date(microseconds: Timestamp.microseconds(timestamp))
        stored.expiresAt = expiresAt.map { Timestamp.date(microseconds: Timestamp.microseconds($0)) }
        return stored
    }
}
