import Synchronization
import Testing

@testable import HeraldCore

/// A sink's sends in parallel: at most the limit at once, each index sent once, outcomes in
/// index order; with a report interval, what finished is reported while a slow send still runs.
@Suite struct DeliverConcurrentlyTests {
    /// Counts sends in flight and the most seen at once.
    final class Flight: Sendable {
        private let state = Mutex((running: 0, most: 0, sent: [Int]()))
        var most: Int { state.withLock { $0.most } }
        var sent: [Int] { state.withLock { $0.sent } }

        func send(_ index: Int, taking pause: Duration = .milliseconds(2)) async -> DeliveryOutcome {
            state.withLock {
                $0.running += 1
                $0.most = max($0.most, $0.running)
                $0.sent.append(index)
            }
            try? await Task.sleep(for: pause)
            state.withLock { $0.running -= 1 }
            return index.isMultiple(of: 2) ? .delivered : .failed(reason: "odd \(index)")
        }
    }

    @Test func outcomesComeInIndexOrderWithNoMoreThanTheLimitInFlight() async {
        let flight = Flight()
        let outcomes = await deliverConcurrently(40, limit: 4) { index in await flight.send(index, taking: .milliseconds(40 - index)) }
        #expect(outcomes == (0..<40).map { $0.isMultiple(of: 2) ? .delivered : .failed(reason: "odd \($0)") })
        #expect(flight.sent.sorted() == Array(0..<40), "every index sent once")
        #expect(flight.most == 4)
    }

    @Test func nothingToSendAndALimitBelowOneStillWork() async {
        #expect(await deliverConcurrently(0, limit: 4) { _ in .delivered }.isEmpty)
        let flight = Flight()
        #expect(await deliverConcurrently(3, limit: 0) { await flight.send($0) }.count == 3)
        #expect(flight.most == 1, "a limit below one sends one at a time")
    }

    @Test func finishedSendsAreReportedWhileASlowOneRuns() async {
        let reports = Mutex([[Int]]())
        let slowStarted = Mutex(false)
        await deliverConcurrently(
            5, limit: 5, reportingEvery: .milliseconds(50),
            to: DeliveryReporter { outcomes in reports.withLock { $0.append(outcomes.map(\.index).sorted()) } }
        ) { index in
            if index == 4 {
                slowStarted.withLock { $0 = true }
                try? await Task.sleep(for: .seconds(1))
            }
            return .delivered
        }
        let seen = reports.withLock { $0 }
        #expect(seen.dropLast().flatMap { $0 }.sorted() == [0, 1, 2, 3], "the fast sends were reported before the slow one finished: \(seen)")
        #expect(seen.last == [4], "the slow send was reported when it finished: \(seen)")
        #expect(seen.flatMap { $0 }.sorted() == [0, 1, 2, 3, 4], "each outcome reported once")
        #expect(slowStarted.withLock { $0 })
    }
}
