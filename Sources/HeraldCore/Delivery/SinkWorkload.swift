import Synchronization

/// How many deliveries each sink has in progress (handed to it and not yet answered), so a
/// worker may leave a slow sink's batch to finish on its own while the sink is given no more
/// than `limit` deliveries at once.
final class SinkWorkload: Sendable {
    private struct State {
        var counts: [String: Int] = [:]
        var full: Set<String> = []
    }

    let limit: Int
    private let state = Mutex(State())

    init(limit: Int) { self.limit = max(1, limit) }

    /// Sinks at their limit: none of their deliveries is claimed or handed off until one answers.
    var full: Set<String> { state.withLock { $0.full } }

    func isFull(_ sink: String) -> Bool { state.withLock { $0.full.contains(sink) } }

    /// Deliveries `sink` has in hand now.
    func count(of sink: String) -> Int { state.withLock { $0.counts[sink, default: 0] } }

    /// - Returns: whether the sink was not full and now is.
    @discardableResult
    func start(_ count: Int, for sink: String) -> Bool {
        state.withLock { state in
            let now = state.counts[sink, default: 0] + count
            state.counts[sink] = now
            return now >= limit && state.full.insert(sink).inserted
        }
    }

    /// - Returns: whether the sink was full and no longer is.
    func finish(_ count: Int, for sink: String) -> Bool {
        state.withLock { state in
            let left = max(0, state.counts[sink, default: 0] - count)
            state.counts[sink] = left == 0 ? nil : left
            return left < limit && state.full.remove(sink) != nil
        }
    }
}

/// One sink's part of a batch in the sink's workload: released as its deliveries are settled,
/// and whatever is left when the sink is done with it, so nothing counts for good.
final class WorkloadShare: Sendable {
    private let held: Mutex<Int>

    init(_ count: Int) { held = Mutex(max(0, count)) }

    /// - Returns: how many of `count` were still held (and now are not).
    func release(_ count: Int) -> Int {
        held.withLock { held in
            let released = min(max(0, count), held)
            held -= released
            return released
        }
    }

    /// - Returns: how many were still held (and now are not).
    func releaseRest() -> Int {
        held.withLock { held in
            defer { held = 0 }
            return held
        }
    }
}
