import Synchronization

/// Background writes (claims, records, fan-out pages) take SQLite's writer one at a time.
///
/// The writer runs transactions in the order they were asked for. Several background writes
/// asked for at once (two workers' claims, their records, a transaction of fan-out pages) each
/// stood in front of an accept that came after them; one at a time, an accept waits for one of
/// them at most, plus its own group commit. While 100 000 scheduled sends fire, the accept p99
/// fell by a quarter and 1.6 times as many accepts got through, for a drain 7 % slower
/// (docs/performance.md, "Background writes in turns").
package final class BackgroundWriteTurns: Sendable {
    private struct State {
        var busy = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    package init() {}

    /// Runs `body` once no other background write is running or waiting before it.
    package func run<Result: Sendable>(_ body: () async throws -> Result) async throws -> Result {
        await take()
        defer { give() }
        return try await body()
    }

    private func take() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                guard state.busy else {
                    state.busy = true
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func give() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiting.isEmpty else {
                state.busy = false
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
