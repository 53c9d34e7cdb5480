import Foundation
import GRDB
import Synchronization

/// Runs `count` concurrent requests with an SQLite writer held until every request is under
/// way, so requests that group-commit queue together: the first alone (it found the writer
/// held), then the rest in as few batches as the machine's pace allows.
public func withHeldWriter(_ writer: any DatabaseWriter, requests count: Int, _ request: @escaping @Sendable (Int) async -> Void) async throws {
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
    // Every request under way (joining a group commit's queue is a lock and an append after
    // that); on a machine starved by a whole test suite some may still be late.
    let deadline = ContinuousClock.now + .seconds(5)
    while started.value.load(ordering: .relaxed) < count && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
    try await Task.sleep(for: .milliseconds(100))
    held.signal()
    try await holding.value
    await requests.value
}

/// How many of a test's tasks have started.
private final class StartedCount: Sendable {
    let value = Atomic(0)
}
