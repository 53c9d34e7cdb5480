import Synchronization
import Testing

@testable import HeraldCore

/// `max_concurrency`: never more sends at once than the limit, and every send runs.
@Suite struct ConcurrencyLimiterTests {
    final class Gate: Sendable {
        private struct State {
            var running = 0
            var mostAtOnce = 0
            var open = false
        }

        private let state = Mutex(State())
        var running: Int { state.withLock { $0.running } }
        var mostAtOnce: Int { state.withLock { $0.mostAtOnce } }
        func open() { state.withLock { $0.open = true } }

        /// Counts itself in, waits until the gate opens, counts itself out.
        func pass(_ value: Int) async -> Int {
            state.withLock {
                $0.running += 1
                $0.mostAtOnce = max($0.mostAtOnce, $0.running)
            }
            while !state.withLock({ $0.open }) { try? await Task.sleep(for: .milliseconds(1)) }
            state.withLock { $0.running -= 1 }
            return value
        }
    }

    @Test func noMoreThanTheLimitRunAtOnceAndEveryOperationRuns() async throws {
        let limiter = ConcurrencyLimiter(limit: 8)
        let gate = Gate()
        let results = Task {
            await withTaskGroup(of: Int.self) { group in
                for value in 0..<50 { group.addTask { await limiter.run { await gate.pass(value) } } }
                return await group.reduce(into: []) { $0.append($1) }
            }
        }
        for _ in 0..<1_000 where gate.running < 8 { try await Task.sleep(for: .milliseconds(5)) }
        // Give a limiter that admitted too many time to show it.
        try await Task.sleep(for: .milliseconds(100))
        #expect(gate.running == 8, "the limit is reached and held while the operations wait")
        gate.open()
        #expect(await results.value.sorted() == Array(0..<50), "every operation ran, once")
        #expect(gate.mostAtOnce == 8)

        // Every slot came back: the next round gets all eight at once again.
        let next = Gate()
        let again = Task {
            await withTaskGroup(of: Int.self) { group in for value in 0..<8 { group.addTask { await limiter.run { await next.pass(value) } } } }
        }
        for _ in 0..<1_000 where next.running < 8 { try await Task.sleep(for: .milliseconds(5)) }
        #expect(next.running == 8)
        next.open()
        await again.value
    }

    /// Two calls of one sink running at once share its limit, rather than each having it.
    @Test func overlappingCallsShareTheLimit() async throws {
        let limiter = ConcurrencyLimiter(limit: 4)
        let gate = Gate()
        let calls = (0..<2).map { _ in
            Task {
                await deliverConcurrently(10, sharing: limiter) { index in
                    _ = await gate.pass(index)
                    return .delivered
                }
            }
        }
        for _ in 0..<1_000 where gate.running < 4 { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(100))
        #expect(gate.running == 4, "four in all, not four per call")
        gate.open()
        for call in calls { #expect(await call.value == Array(repeating: .delivered, count: 10)) }
        #expect(gate.mostAtOnce == 4)
    }
}
