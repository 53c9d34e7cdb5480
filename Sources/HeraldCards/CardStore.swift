public import Foundation
public import HeraldCore

/// Cards, users' pools and histories of seen cards, and engagement events (docs/cards.md).
public protocol CardStore: Sendable {
    /// Creates or replaces cards; a deleted card put again comes back. - Returns: the ids that
    /// were not stored before (created, for a 201).
    func putCards(_ cards: [Card]) async throws -> Set<String>
    /// Deletes a card: it leaves every pool (pulls report it in `cards_removed`) and stays in
    /// the histories that hold it. - Returns: false when no such card is stored.
    func deleteCard(id: String) async throws -> Bool
    /// Applies score updates by ``ScoreRules``; an update for a card not stored is rejected
    /// alone, never the batch.
    func applyScores(_ updates: [ScoreUpdate]) async throws -> ScoreReport
    /// Appends the cards reported seen that were not yet seen to the user's history (oldest
    /// report first, then by card id) and takes them out of the pool. Idempotent.
    /// - Returns: the history entries of the reported cards, by index.
    /// - Throws: a 422 naming the card when one was never stored.
    func markSeen(userID: String, _ reports: [SeenReport]) async throws -> [CardHistoryEntry]
    /// Moves the user's top-scored unseen card (ties by card id) to the end of their history.
    /// - Returns: its entry and the card, or nil when the pool is empty.
    func promote(userID: String, at date: Date) async throws -> (entry: CardHistoryEntry, card: Card)?
    /// Where the user's pull state stands now, read at once (one read: a 304 costs no more).
    func cardState(userID: String) async throws -> CardState
    /// What a pull answers: everything (`since` nil) or the changes since `since`.
    func pull(userID: String, since: CardMark?, order: PoolOrder, limit: Int) async throws -> CardPull

    /// Stores events not stored before (by user and `event_id`) in one transaction, and marks
    /// the cards of reactions seen. - Returns: the events that were new.
    func storeEvents(_ events: [EngagementEvent], at date: Date) async throws -> [EngagementEvent]
    /// Reaction and focus counts for one card.
    func eventStats(card: String) async throws -> CardEventStats
    /// Events received before `before`, in batches.
    func purgeEvents(before: Date, limit: Int) async throws -> Int
}

/// The counters a cache key is made of: the cards' change clock (every process shares it)
/// and the user's own change counter, both only ever growing.
public struct CardMark: Sendable, Equatable {
    public var cardsClock: Int64
    public var userSeq: Int64

    public init(cardsClock: Int64, userSeq: Int64) {
        self.cardsClock = cardsClock
        self.userSeq = userSeq
    }
}

/// Everything a pull's cache key depends on.
public struct CardState: Sendable, Equatable {
    public var mark: CardMark
    /// The id of the newest notification in the user's history.
    public var newestNotification: String?
    /// The inbox's badge (docs/inbox.md: items in the inbox not read), read from its counters,
    /// so a 304 costs the same however many unread rows a user has.
    public var unread: Int
    /// The user's settings as stored (JSON text), nil for the defaults: the key digests the
    /// text, so a 304 decodes nothing.
    public var settingsJSON: String?

    public init(mark: CardMark, newestNotification: String?, unread: Int, settingsJSON: String?) {
        self.mark = mark
        self.newestNotification = newestNotification
        self.unread = unread
        self.settingsJSON = settingsJSON
    }

    public func settings() throws -> UserSettings {
        guard let settingsJSON else { return UserSettings() }
        return try JSONDecoder().decode(UserSettings.self, from: Data(settingsJSON.utf8))
    }
}

/// What a pull holds, before it is written out.
public struct CardPull: Sendable, Equatable {
    public struct PoolEntry: Sendable, Equatable {
        public var card: String
        public var score: Double

        public init(card: String, score: Double) {
            self.card = card
            self.score = score
        }
    }

    public var mark: CardMark
    public var full: Bool
    /// Cards the answer mentions, or whose content changed.
    public var cards: [CardContent]
    public var cardsRemoved: [String]
    /// In the order asked for.
    public var pool: [PoolEntry]
    public var poolRemoved: [String]
    /// By index.
    public var history: [CardHistoryEntry]

    public init(
        mark: CardMark, full: Bool, cards: [CardContent], cardsRemoved: [String], pool: [PoolEntry], poolRemoved: [String], history: [CardHistoryEntry]
    ) {
        self.mark = mark
        self.full = full
        self.cards = cards
        self.cardsRemoved = cardsRemoved
        self.pool = pool
        self.poolRemoved = poolRemoved
        self.history = history
    }
}

/// How users engaged with one card.
public struct CardEventStats: Sendable, Equatable {
    public var ctfo: Int
    public var tfu: Int
    public var tifb: Int
    public var focus: Int

    public init(ctfo: Int = 0, tfu: Int = 0, tifb: Int = 0, focus: Int = 0) {
        self.ctfo = ctfo
        self.tfu = tfu
        self.tifb = tifb
        self.focus = focus
    }
}
