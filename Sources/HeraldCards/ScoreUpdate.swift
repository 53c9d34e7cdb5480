/// A card's score for one user, as of `timestamp` (any number the backend counts time in,
/// compared as a number).
public struct ScoreUpdate: Sendable, Equatable {
    public var userID: String
    public var card: String
    public var score: Double
    public var timestamp: Double

    public init(userID: String, card: String, score: Double, timestamp: Double) {
        self.userID = userID
        self.card = card
        self.score = score
        self.timestamp = timestamp
    }

    /// Whether this score replaces `other` for the same card: the later timestamp wins; at
    /// equal timestamps the higher score does, so the outcome never depends on arrival order.
    public func supersedes(score other: Double, at otherTimestamp: Double) -> Bool {
        timestamp > otherTimestamp || (timestamp == otherTimestamp && score > other)
    }
}

/// What a user's pool holds for one card before an update: its score, if it has one, and
/// whether the user has already seen it.
public struct PoolSlot: Sendable, Equatable {
    public var score: Double?
    public var timestamp: Double?
    public var seen: Bool

    public init(score: Double?, timestamp: Double?, seen: Bool) {
        self.score = score
        self.timestamp = timestamp
        self.seen = seen
    }
}

/// The rules of the pool (docs/cards.md), shared by both stores.
public enum ScoreRules {
    public enum Decision: Sendable, Equatable {
        case apply
        case ignoredSeen
        case stale
    }

    public static func decide(_ update: ScoreUpdate, over slot: PoolSlot?) -> Decision {
        guard let slot else { return .apply }
        if slot.seen { return .ignoredSeen }
        guard let score = slot.score, let timestamp = slot.timestamp else { return .apply }
        return update.supersedes(score: score, at: timestamp) ? .apply : .stale
    }

    /// One update per (user, card): the one that would win whatever the order. The others
    /// are counted stale.
    public static func winners(_ updates: [ScoreUpdate]) -> (winners: [ScoreUpdate], superseded: Int) {
        var best: [String: [String: ScoreUpdate]] = [:]
        var superseded = 0
        for update in updates {
            if let current = best[update.userID]?[update.card] {
                superseded += 1
                if update.supersedes(score: current.score, at: current.timestamp) { best[update.userID, default: [:]][update.card] = update }
            } else {
                best[update.userID, default: [:]][update.card] = update
            }
        }
        let winners = best.keys.sorted().flatMap { user in best[user, default: [:]].values.sorted { $0.card < $1.card } }
        return (winners, superseded)
    }
}

/// The answer to a batch of score updates.
public struct ScoreReport: Sendable, Equatable {
    public struct Rejection: Sendable, Equatable {
        public var userID: String
        public var card: String
        public var reason: String

        public init(userID: String, card: String, reason: String) {
            self.userID = userID
            self.card = card
            self.reason = reason
        }
    }

    public var applied = 0
    public var ignoredSeen = 0
    public var stale = 0
    public var rejected: [Rejection] = []

    public init(applied: Int = 0, ignoredSeen: Int = 0, stale: Int = 0, rejected: [Rejection] = []) {
        self.applied = applied
        self.ignoredSeen = ignoredSeen
        self.stale = stale
        self.rejected = rejected
    }

    public mutating func add(_ other: ScoreReport) {
        applied += other.applied
        ignoredSeen += other.ignoredSeen
        stale += other.stale
        rejected += other.rejected
    }
}
