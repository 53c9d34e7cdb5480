/// A committed change that live readers (`GET /api/stream`) may need to hear about.
public enum StoreChange: Sendable, Equatable {
    /// History rows were written for these users.
    case history(users: [String])
    /// The published content changed: what anyone sees may have.
    case content
    /// These users' attributes changed: the content they see may have.
    case attributes(users: [String])
    /// These users' inbox states changed (a mark, a snooze ending): their counts may have.
    case inbox(users: [String])
    /// The pull feed's messages changed (docs/feed.md): every process reloads its snapshot.
    case feed
}

/// Tells live readers what was committed, in this process and (PostgreSQL) in every other.
public protocol ChangeStore: Sendable {
    /// Calls `heard` after each commit of a ``StoreChange`` until the task is cancelled (then it
    /// returns) or the store loses the means to hear them (then it throws; call again).
    /// Changes are hints: a reader re-reads what it serves, so a missed or repeated one costs
    /// latency, never correctness.
    func watchChanges(_ heard: @escaping @Sendable (StoreChange) -> Void) async throws
}

/// History rows in the order they were written for one user: what a resumed stream replays.
public struct SequencedHistoryItem: Sendable, Equatable {
    /// Grows with each row written for the user, in commit order; the stream's event id.
    public var sequence: Int64
    /// The row as the history endpoint shows it.
    public var item: HistoryItem

    /// A row and its place in the user's order.
    public init(sequence: Int64, item: HistoryItem) {
        self.sequence = sequence
        self.item = item
    }
}
