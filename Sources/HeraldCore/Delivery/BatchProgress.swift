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

/// Which deliveries of one sink's call have been reported (``NotificationSink/deliver(_:reporting:)``),
/// and the first error recording them.
final class SinkReports: Sendable {
    private struct State {
        var reported: [Bool]
        var error: (any Error)?
    }

    private let state: Mutex<State>

    init(count: Int) {
        state = Mutex(State(reported: Array(repeating: false, count: count)))
    }

    /// The outcomes of `reported` for deliveries in the call and not reported before; a sink's
    /// other reports (an index out of range, a second outcome) are dropped.
    func take(_ reported: [(index: Int, outcome: DeliveryOutcome)]) -> [(index: Int, outcome: DeliveryOutcome)] {
        state.withLock { state in
            reported.filter { report in
                guard state.reported.indices.contains(report.index), !state.reported[report.index] else { return false }
                state.reported[report.index] = true
                return true
            }
        }
    }

    /// The indices never reported.
    var missing: [Int] {
        state.withLock { state in state.reported.indices.filter { !state.reported[$0] } }
    }

    var error: (any Error)? { state.withLock { $0.error } }

    func failed(_ error: any Error) {
        state.withLock { if $0.error == nil { $0.error = error } }
    }
}
