import Foundation
import GRDB
import HeraldCore
import HeraldTestSupport
import Synchronization
import Testing

@testable import HeraldStore

/// On SQLite a write that throws inside a group commit fails its whole batch, which then runs
/// again one write per transaction. A request refused for its own input must not do that, or a
/// client sending refused requests would cost every other writer the group commit.
@Suite(.cleansUp) struct SQLiteGroupCommitRefusalTests {
    @Test func aSeenReportNamingAnUnknownCardFailsAloneInsideItsBatch() async throws {
        let directory = try TestResources.temporaryDirectory("herald-store")
        let store = try SQLiteStore(path: directory.appendingPathComponent("test.sqlite").path)
        TestResources.register { await store.close() }
        try await store.migrate()
        let at = Date(timeIntervalSince1970: 1_700_000_000)
        let cards = (0..<31).map { "card-\($0)" }
        _ = try await store.putCards(cards.map { Card(id: $0, metadata: [:], postedAt: at, hot: 0.5) })

        let commits = CommitCounter()
        store.writer.add(transactionObserver: commits, extent: .observerLifetime)
        // The writer is held while the reports queue, so all but the first join one batch.
        let held = DispatchSemaphore(value: 0)
        defer { held.signal() } // never left holding the writer, whatever throws below
        let holding = Task { try await store.writer.write { _ in held.wait() } }
        try await Task.sleep(for: .milliseconds(50))
        let started = StartedCount()
        let answers = Task {
            await withTaskGroup(of: (String, Bool).self) { group in
                for card in cards + ["never"] {
                    group.addTask {
                        started.value.add(1, ordering: .relaxed)
                        return (card, (try? await store.markSeen(userID: "user-\(card)", [SeenReport(card: card, at: at)])) != nil)
                    }
                }
                return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
        }
        // Every report under way (joining the queue is a lock and an append after that).
        let deadline = ContinuousClock.now + .seconds(20)
        while started.value.load(ordering: .relaxed) < cards.count + 1 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(100))
        held.signal()
        try await holding.value
        let seen = await answers.value
        #expect(seen["never"] == false, "the unknown card was refused")
        #expect(cards.allSatisfy { seen[$0] == true }, "every known card was seen")
        // The holder's commit, then one per batch: the first report alone (it found the writer
        // held), then the rest together. Refused by a throw, the second batch ran again as 31
        // transactions.
        #expect(commits.count <= 4, "\(commits.count) commits for 32 reports")
        withExtendedLifetime(commits) {}
    }
}

/// Counts the commits of a database's write transactions.
private final class CommitCounter: TransactionObserver, Sendable {
    private let commits = Mutex(0)

    var count: Int { commits.withLock { $0 } }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { true }
    func databaseDidChange(with event: DatabaseEvent) {}
    func databaseDidCommit(_ db: Database) { commits.withLock { $0 += 1 } }
    func databaseDidRollback(_ db: Database) {}
}

/// How many of a test's tasks have started.
private final class StartedCount: Sendable {
    let value = Atomic(0)
}
