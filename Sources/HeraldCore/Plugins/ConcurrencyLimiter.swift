import Synchronization

/// At most `limit` operations at once across every caller: a sink's `max_concurrency`, shared
/// by the engine's calls to it, which overlap while a slow sink finishes a batch.
///
/// A lock rather than an actor: a send that finds a free slot (the usual case) starts on the
/// caller's executor, where an actor would hop onto itself to count and back off to send, and
/// again to release, for every push.
public final class ConcurrencyLimiter: Sendable {
    private struct State {
        var running = 0
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    /// The most operations running at once (at least 1).
    public let limit: Int
    private let state = Mutex(State())

    /// A limiter of `limit` slots; below 1 reads as 1.
    public init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Runs `operation` once a slot is free, waiting in arrival order.
    public func run<T: Sendable>(_ operation: @Sendable () async -> T) async -> T {
        await acquire()
        defer { release() }
        return await operation()
    }

    private func tryAcquire(_ state: inout State) -> Bool {
        guard state.running < limit else { return false }
        state.running += 1
        return true
    }

    private func acquire() async {
        if state.withLock({ tryAcquire(&$0) }) { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            // A slot may have been released since the first look: take it, or queue.
            let admitted = state.withLock { state in
                if tryAcquire(&state) { return true }
                state.waiting.append(continuation)
                return false
            }
            if admitted { continuation.resume() }
        }
    }

    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            // The slot passes straight to the next waiter.
            if state.waiting.isEmpty {
                state.running -= 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
