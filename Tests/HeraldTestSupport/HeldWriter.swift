import Foundation
import GRDB
import Synchronization

/// Counts the transactions an SQLite writer commits while `count` concurrent requests run,
/// with the writer held until every request is under way: requests that group-commit then
/// share as few transactions as they can (the first alone, having found the writer held, then
/// the rest together), so a request that breaks its batch up shows as a commit per request.
/// - Returns: the commits, the holder's own included.
public func commitsWithHeldWriter(
    _ writer: any DatabaseWriter, requests count: Int, _ request: @escaping @Sendable (Int) async -> Void
) async throws -> Int {
    let commits = CommitCounter()
    writer.add(transactionObserver: commits, extent: .observerLifetime)
    let held = DispatchSemaphore(value: 0)
    defer { held.signal() } // never left holding the writer, whatever throws below
    let holding = Task { try await writer.write { _ in held.wait() } }
    try await Task.sleep(for: .milliseconds(50))
    let started = StartedCount()
    let requests = Task {
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                group.addTask {
                    started.value.add(1, ordering: .relaxed)
                    await request(index)
                }
            }
        }
    }
    // Every request under way (joining a group commit's queue is a lock and an append after that).
    let deadline = ContinuousClock.now + .seconds(20)
    while started.value.load(ordering: .relaxed) < count && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
    try await Task.sleep(for: .milliseconds(100))
    held.signal()
    try await holding.value
    await requests.value
    return withExtendedLifetime(commits) { commits.count }
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
