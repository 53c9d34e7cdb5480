import GRDB
import HeraldCore
import Synchronization

/// Counts this process's commits to the SQLite database. One process owns a SQLite database
/// (several processes share PostgreSQL), so a value read before a read and unchanged after it
/// means nothing was committed in between: what the read saw is still current. The pull's 304
/// path answers from memory that way instead of reading.
final class CommitCounter: TransactionObserver, Sendable {
    private let commits = Atomic<Int>(0)

    var value: Int { commits.load(ordering: .acquiring) }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
    func databaseDidChange(with event: DatabaseEvent) {}
    func databaseDidCommit(_ db: Database) { commits.add(1, ordering: .releasing) }
    func databaseDidRollback(_ db: Database) {}
}

/// Users' card states read at a commit count, valid while the count has not moved.
final class CardStateCache: Sendable {
    private let entries = Mutex<[String: (commits: Int, state: CardState)]>([:])
    private let capacity: Int

    init(capacity: Int = 100_000) {
        self.capacity = capacity
    }

    func state(userID: String, commits: Int) -> CardState? {
        entries.withLock { entries in
            guard let entry = entries[userID], entry.commits == commits else { return nil }
            return entry.state
        }
    }

    func remember(_ state: CardState, userID: String, commits: Int) {
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[userID] = (commits, state)
        }
    }
}
