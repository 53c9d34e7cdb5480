import Synchronization

/// Users' counts as last read, each with the database's commit count before that read: still
/// current while the count has not moved (one process writes a SQLite database, and any commit
/// may have moved a counter). The cards' 304 path does the same; a user polling their counts
/// then costs no read while nothing is written.
final class RememberedCounts: Sendable {
    /// Users remembered at once; past it, everything is forgotten (a cache, not a store).
    static let capacity = 10_000

    let commitCount: @Sendable () -> Int
    private let entries = Mutex<[String: (commits: Int, counts: InboxCounts)]>([:])

    init(commitCount: @escaping @Sendable () -> Int) {
        self.commitCount = commitCount
    }

    func counts(userID: String, commits: Int) -> InboxCounts? {
        entries.withLock { entries in entries[userID].flatMap { $0.commits == commits ? $0.counts : nil } }
    }

    func remember(_ counts: InboxCounts, userID: String, commits: Int) {
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[userID] = (commits, counts)
        }
    }
}
