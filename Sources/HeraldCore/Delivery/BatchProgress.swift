import Synchronization

/// One claimed batch whose sinks may answer after its worker has moved on: the leases still
/// out (kept by a heartbeat that stops with the last sink's answer), and a signal for the
/// worker that waits for it.
final class BatchProgress: Sendable {
    let leases: OutstandingLeases
    private let remaining: Mutex<(sinks: Int, heartbeat: Task<Void, Never>?)>
    private let done = WakeSignal()

    init(_ batch: [Delivery], sinks: Int) {
        leases = OutstandingLeases(batch)
        remaining = Mutex((max(sinks, 1), nil))
    }

    /// The task keeping the leases; cancelled when the last sink has answered.
    func keep(_ heartbeat: Task<Void, Never>) {
        let finished = remaining.withLock { state -> Bool in
            guard state.sinks > 0 else { return true }
            state.heartbeat = heartbeat
            return false
        }
        if finished { heartbeat.cancel() }
    }

    /// One sink's deliveries are answered and recorded (or could not be recorded).
    func sinkFinished() {
        let (last, heartbeat) = remaining.withLock { state -> (Bool, Task<Void, Never>?) in
            state.sinks -= 1
            guard state.sinks == 0 else { return (false, nil) }
            defer { state.heartbeat = nil }
            return (true, state.heartbeat)
        }
        guard last else { return }
        heartbeat?.cancel()
        done.notify()
    }

    /// Returns when every sink of the batch has finished, or after `patience`.
    func wait(patience: Duration) async {
        // A batch answered already costs no timer.
        guard remaining.withLock({ $0.sinks > 0 }) else { return }
        await done.wait(timeout: patience)
    }
}

/// The leases of a batch whose outcomes are not recorded yet.
final class OutstandingLeases: Sendable {
    private let leases: Mutex<Set<DeliveryLease>>

    init(_ batch: [Delivery]) {
        leases = Mutex(Set(batch.map { DeliveryLease(id: $0.id, attempt: $0.attempt) }))
    }

    var current: [DeliveryLease] { leases.withLock { Array($0) } }

    func finish(_ deliveries: [Delivery]) {
        leases.withLock { set in
            for delivery in deliveries { set.remove(DeliveryLease(id: delivery.id, attempt: delivery.attempt)) }
        }
    }
}
