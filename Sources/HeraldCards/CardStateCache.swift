import HeraldCore
import Synchronization

/// Users' card states read at a SQLite commit count (HeraldStore's `CommitCounter`), valid while
/// the count has not moved: the pull's 304 path answers from memory that way instead of reading.
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
