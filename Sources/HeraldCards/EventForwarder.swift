import HeraldCore
import Logging
import Synchronization

/// Hands stored events to the sinks that take them (``SinkCapabilities/events``), a batch at
/// a time, retrying a sink's `retry` answers a few times. The events are stored before this
/// runs; forwarding is best effort, not a durable queue (docs/cards.md). At most
/// `maxInFlight` batches wait at once for each sink: one that stalls costs memory no further,
/// and the others' batches still go out (a count shared by every sink let one stalled receiver
/// stop the forwarding to all).
package final class EventForwarder: Sendable {
    let sinks: [any NotificationSink]
    let logger: Logger
    let retryDelays: [Duration]
    let maxInFlight: Int
    /// Batches in flight, by the sink's index in `sinks`.
    private let inFlight: Mutex<[Int]>

    package init(
        sinks: [any NotificationSink], logger: Logger, maxInFlight: Int = 1_000, retryDelays: [Duration] = [.seconds(1), .seconds(5), .seconds(30)]
    ) {
        self.sinks = sinks.filter { $0.capabilities.contains(.events) }
        self.logger = logger
        self.maxInFlight = max(1, maxInFlight)
        self.retryDelays = retryDelays
        self.inFlight = Mutex(Array(repeating: 0, count: self.sinks.count))
    }

    /// Batches waiting for the sink at `index` in ``sinks``.
    func waiting(for index: Int) -> Int { inFlight.withLock { $0[index] } }

    func forward(_ events: [EngagementEvent]) {
        guard !events.isEmpty else { return }
        for (index, sink) in sinks.enumerated() {
            let admitted = inFlight.withLock { counts in
                guard counts[index] < maxInFlight else { return false }
                counts[index] += 1
                return true
            }
            guard admitted else {
                logger.warning("sink '\(sink.name)' is behind: \(events.count) engagement events not forwarded (they are stored)")
                continue
            }
            let retryDelays = self.retryDelays
            let logger = self.logger
            Task {
                defer { self.inFlight.withLock { $0[index] -= 1 } }
                var remaining = events
                for delay in [Duration.zero] + retryDelays {
                    if delay > .zero { try? await Task.sleep(for: delay) }
                    let outcomes = await sink.deliverEvents(remaining)
                    remaining = zip(remaining, outcomes).compactMap { event, outcome in
                        if case .retry = outcome { return event } else { return nil }
                    }
                    if remaining.isEmpty { return }
                }
                logger.warning("sink '\(sink.name)' did not take \(remaining.count) engagement events after \(retryDelays.count + 1) attempts")
            }
        }
    }
}
