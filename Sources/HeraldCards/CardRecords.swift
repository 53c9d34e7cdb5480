import Foundation
import HeraldCore

/// What both stores share about cards: how a card is stored and how a pull's changes are put
/// together from the rows each engine reads.
enum CardRecords {
    static func metadataText(_ card: Card) -> String {
        JSONValue.object(card.metadata).canonicalText
    }

    static func card(id: String, metadata: String, postedAt: Int64, hot: Double?) -> CardContent {
        CardContent(id: id, postedAt: Timestamp.date(microseconds: postedAt), hot: hot, metadataJSON: metadata)
    }

    /// One of the user's rows changed since the key.
    struct ChangedSlot {
        var card: String
        var score: Double?
        var seenIndex: Int64?
        /// The card is deleted (or gone).
        var deleted: Bool
    }

    /// A card the user holds whose content changed since the key.
    struct ChangedCard {
        var id: String
        var deleted: Bool
    }

    /// The changes since `since`: pool entries that came or changed, cards that left the pool
    /// (seen or deleted), new history entries, and the content of every card they mention.
    static func delta(
        mark: CardMark, slots: [ChangedSlot], changedCards: [ChangedCard], order: PoolOrder, fetch: ([String]) throws -> [CardContent]
    ) throws -> CardPull {
        var pool: [CardPull.PoolEntry] = []
        var poolRemoved: Set<String> = []
        var cardsRemoved: Set<String> = []
        var history: [CardHistoryEntry] = []
        var mentioned: Set<String> = []
        for slot in slots {
            if let index = slot.seenIndex {
                history.append(CardHistoryEntry(index: index, card: slot.card))
                poolRemoved.insert(slot.card)
                if !slot.deleted { mentioned.insert(slot.card) }
            } else if slot.deleted {
                poolRemoved.insert(slot.card)
                cardsRemoved.insert(slot.card)
            } else if let score = slot.score {
                pool.append(.init(card: slot.card, score: score))
                mentioned.insert(slot.card)
            }
        }
        let seen = Set(history.map(\.card))
        for card in changedCards {
            if card.deleted {
                cardsRemoved.insert(card.id)
                if !seen.contains(card.id) { poolRemoved.insert(card.id) }
            } else {
                mentioned.insert(card.id)
            }
        }
        let cards = try fetch(mentioned.sorted())
        return CardPull(
            mark: mark, full: false, cards: cards, cardsRemoved: cardsRemoved.sorted(), pool: sorted(pool, order: order, cards: cards),
            poolRemoved: poolRemoved.subtracting(pool.map(\.card)).sorted(), history: history.sorted { $0.index < $1.index }
        )
    }

    static func sorted(_ pool: [CardPull.PoolEntry], order: PoolOrder, cards: [CardContent]) -> [CardPull.PoolEntry] {
        switch order {
        case .hot:
            return pool.sorted { $0.score != $1.score ? $0.score > $1.score : $0.card < $1.card }
        case .recent:
            let posted = Dictionary(cards.map { ($0.id, $0.postedAt) }, uniquingKeysWith: { first, _ in first })
            return pool.sorted { a, b in
                let (x, y) = (posted[a.card] ?? .distantPast, posted[b.card] ?? .distantPast)
                return x != y ? x > y : a.card < b.card
            }
        }
    }

    /// Seen reports in the order they join a history: earliest first, then by card id; one per card.
    static func ordered(_ reports: [SeenReport]) -> [SeenReport] {
        var earliest: [String: Date] = [:]
        for report in reports { earliest[report.card] = min(earliest[report.card] ?? report.at, report.at) }
        return earliest.map { SeenReport(card: $0.key, at: $0.value) }.sorted { $0.at != $1.at ? $0.at < $1.at : $0.card < $1.card }
    }

    /// Adds one `type, reaction, count` row of the stats query to `stats`.
    static func tally(_ stats: inout CardEventStats, type: String?, reaction: String?, count: Int) {
        switch (type, reaction) {
        case ("focus", _): stats.focus += count
        case ("reaction", "ctfo"): stats.ctfo += count
        case ("reaction", "tfu"): stats.tfu += count
        case ("reaction", "tifb"): stats.tifb += count
        default: break
        }
    }

    static func unknownCard(_ id: String) -> HeraldError {
        HeraldError(.unprocessable, code: "unknown_card", "card '\(id)' is not a known card")
    }
}
