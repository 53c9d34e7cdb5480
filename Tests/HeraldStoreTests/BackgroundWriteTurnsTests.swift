import HeraldStore
import Synchronization
import Testing

/// Background writes take SQLite's writer one at a time, and a write that fails gives its turn
/// up (``BackgroundWriteTurns``).
@Suite struct BackgroundWriteTurnsTests {
    struct Refused: Error {}

    final class Log: Sendable {
        private struct State {
            var running = 0
            var most = 0
            var ran: [Int] = []
            var asked = 0
        }
        private let state = Mutex(State())
        func ask() { state.withLock { $0.asked += 1 } }
        var asked: Int { state.withLock { $0.asked } }
        func start(_ n: Int) {
            state.withLock {
                $0.running += 1
                $0.most = max($0.most, $0.running)
                $0.ran.append(n)
            }
        }
        func end() { state.withLock { $0.running -= 1 } }
        var most: Int { state.withLock { $0.most } }
        var ran: [Int] { state.withLock { $0.ran } }
    }

    @Test func oneAtATime() async throws {
        let turns = BackgroundWriteTurns()
        let log = Log()
        try await withThrowingTaskGroup(of: Void.self) { group in
            // The first holds its turn until every other has asked for one.
            group.addTask {
                try await turns.run {
                    log.start(0)
                    while log.asked < 20 { try await Task.sleep(for: .milliseconds(1)) }
                    log.end()
                }
            }
            try await Task.sleep(for: .milliseconds(20))
            for n in 1...20 {
                group.addTask {
                    log.ask()
                    try await turns.run {
                        log.start(n)
                        try await Task.sleep(for: .milliseconds(1))
                        log.end()
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(log.most == 1, "never two at once")
        #expect(log.ran.count == 21 && log.ran.first == 0 && Set(log.ran).count == 21, "\(log.ran)")
    }

    @Test(.timeLimit(.minutes(1))) func aWriteThatFailsGivesItsTurnUp() async throws {
        let turns = BackgroundWriteTurns()
        await #expect(throws: Refused.self) { try await turns.run { throw Refused() } }
        let ran = try await turns.run { 42 }
        #expect(ran == 42)
    }
}
