import Foundation
import HeraldCards
import HeraldCore
import HeraldTestSupport
import Testing

/// Cards, pools, histories and engagement events on every storage engine (docs/cards.md).
@Suite(.cleansUp) struct CardStoreConformanceTests {
    static let epoch = Date(timeIntervalSince1970: 1_790_000_000)

    static func card(_ id: String, minutes: Double = 0) -> Card {
        Card(id: id, metadata: ["title": .string("card \(id)"), "n": .integer(7)], postedAt: epoch.addingTimeInterval(minutes * 60), hot: 0.5)
    }

    static func update(_ user: String, _ card: String, _ score: Double, at timestamp: Double) -> ScoreUpdate {
        ScoreUpdate(userID: user, card: card, score: score, timestamp: timestamp)
    }

    @Test(arguments: StoreKind.allCases)
    func cardsAreStoredReplacedAndDeleted(_ kind: StoreKind) async throws {
        let store = try await kind.makeWithCards().cards
        #expect(try await store.putCards([Self.card("a"), Self.card("b")]) == ["a", "b"])
        #expect(try await store.putCards([Self.card("a", minutes: 5)]) == [], "a second put replaces")
        #expect(try await store.deleteCard(id: "a"))
        #expect(try await store.deleteCard(id: "a"), "deleting again finds it")
        #expect(try await store.deleteCard(id: "nope") == false)
        _ = try await store.applyScores([Self.update("u", "b", 1, at: 1)])
        let pull = try await store.pull(userID: "u", since: nil, order: .hot, limit: 10)
        #expect(try pull.cards.map { try $0.card() } == [Self.card("b")], "metadata, posted_at and hot come back as stored")
    }

    @Test(arguments: StoreKind.allCases)
    func scoreRulesLatestTimestampWinsSeenIgnoredUnknownRejected(_ kind: StoreKind) async throws {
        let store = try await kind.makeWithCards().cards
        _ = try await store.putCards(["a", "b", "c"].map { Self.card($0) })
        var report = try await store.applyScores([Self.update("u", "a", 0.5, at: 10), Self.update("u", "b", 0.9, at: 10), Self.update("u", "zz", 1, at: 10)])
        #expect(report == ScoreReport(applied: 2, rejected: [.init(userID: "u", card: "zz", reason: "unknown_card")]))
        report = try await store.applyScores([Self.update("u", "a", 0.1, at: 9)])
        #expect(report == ScoreReport(stale: 1), "an older update arriving late changes nothing")
        report = try await store.applyScores([Self.update("u", "a", 0.7, at: 11), Self.update("u", "a", 0.2, at: 12)])
        #expect(report == ScoreReport(applied: 1, stale: 1), "within a batch too")
        _ = try await store.markSeen(userID: "u", [SeenReport(card: "b", at: Self.epoch)])
        report = try await store.applyScores([Self.update("u", "b", 5, at: 100)])
        #expect(report == ScoreReport(ignoredSeen: 1))
        let pull = try await store.pull(userID: "u", since: nil, order: .hot, limit: 10)
        #expect(pull.pool == [.init(card: "a", score: 0.2)])
        #expect(pull.history == [CardHistoryEntry(index: 0, card: "b")])
        _ = try await store.deleteCard(id: "c")
        #expect(try await store.applyScores([Self.update("u", "c", 1, at: 1)]).rejected.map(\.reason) == ["unknown_card"], "a deleted card takes no scores")
    }

    @Test(arguments: StoreKind.allCases)
    func seenIsIdempotentInAnyOrderAndPromoteTakesTheTop(_ kind: StoreKind) async throws {
        let store = try await kind.makeWithCards().cards
        _ = try await store.putCards(["a", "b", "c", "d"].map { Self.card($0) })
        _ = try await store.applyScores([Self.update("u", "a", 0.3, at: 1), Self.update("u", "b", 0.9, at: 1), Self.update("u", "c", 0.9, at: 1)])
        let late = [SeenReport(card: "d", at: Self.epoch.addingTimeInterval(60)), SeenReport(card: "a", at: Self.epoch)]
        let first = try await store.markSeen(userID: "u", late)
        #expect(first == [CardHistoryEntry(index: 0, card: "a"), CardHistoryEntry(index: 1, card: "d")], "earliest first")
        #expect(try await store.markSeen(userID: "u", late.reversed()) == first, "a retry changes nothing")
        await #expect(throws: HeraldError.self) { try await store.markSeen(userID: "u", [SeenReport(card: "never", at: Self.epoch)]) }
        // b and c tie at 0.9: the card id breaks it.
        #expect(try await store.promote(userID: "u", at: Self.epoch)?.entry == CardHistoryEntry(index: 2, card: "b"))
        let promoted = try await store.promote(userID: "u", at: Self.epoch)
        #expect(promoted?.entry == CardHistoryEntry(index: 3, card: "c"))
        #expect(promoted?.card == Self.card("c"))
        #expect(try await store.promote(userID: "u", at: Self.epoch) == nil, "the pool is empty")
        #expect(try await store.promote(userID: "other", at: Self.epoch) == nil)
    }

    /// Ties go to the smaller card id by its bytes (docs/cards.md), whatever the database's
    /// collation: PostgreSQL ordered by its default collation, and under a usual one (ICU or
    /// glibc `en_US`) `a` comes before `B` and punctuation is skipped, so promote and a pull
    /// broke ties otherwise than SQLite and the pull's own changes (sorted in Swift).
    @Test(arguments: StoreKind.allCases)
    func tiesGoToTheSmallerCardIDByItsBytes(_ kind: StoreKind) async throws {
        let store = try await kind.makeWithCards().cards
        let ids = ["card_3", "a", "card1", "B", "card.0", "card-2", "Card:9"]
        let bytewise = ids.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        #expect(bytewise == ["B", "Card:9", "a", "card-2", "card.0", "card1", "card_3"])
        _ = try await store.putCards(ids.map { Self.card($0) })
        _ = try await store.applyScores(ids.map { Self.update("u", $0, 0.5, at: 1) } + ids.map { Self.update("v", $0, 0.5, at: 1) })
        for order in PoolOrder.allCases {
            let top = try await store.pull(userID: "u", since: nil, order: order, limit: 3)
            #expect(top.pool.map(\.card) == Array(bytewise.prefix(3)), "\(order): the three smallest ids, in order")
            let all = try await store.pull(userID: "u", since: nil, order: order, limit: 100)
            #expect(all.pool.map(\.card) == bytewise, "\(order)")
        }
        var promoted: [String] = []
        while let next = try await store.promote(userID: "v", at: Self.epoch) { promoted.append(next.card.id) }
        #expect(promoted == bytewise)
    }

    /// Apps report each card shown, many at once (SQLite commits them in groups): every report
    /// lands as if made alone. Each user's history holds each card once, indexed 0, 1, … without
    /// gaps; both reports of one card answer its one index; a report naming an unknown card
    /// fails alone.
    @Test(arguments: StoreKind.allCases)
    func concurrentSeenReportsLandAsIfOneByOne(_ kind: StoreKind) async throws {
        let store = try await kind.makeWithCards().cards
        let cards = (0..<16).map { "card-\($0)" }
        _ = try await store.putCards(cards.map { Self.card($0) })
        let users = (0..<4).map { "user-\($0)" }
        let answers = await withTaskGroup(of: (String, String, [CardHistoryEntry]?).self) { group in
            for user in users {
                for card in cards + cards + ["never"] {
                    group.addTask {
                        (user, card, try? await store.markSeen(userID: user, [SeenReport(card: card, at: Self.epoch)]))
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        for user in users {
            let mine = answers.filter { $0.0 == user }
            #expect(mine.filter { $0.1 == "never" }.allSatisfy { $0.2 == nil }, "an unknown card was accepted")
            var indexByCard: [String: Set<Int64>] = [:]
            for (_, card, entries) in mine where card != "never" {
                guard let entries, entries.count == 1, let entry = entries.first, entry.card == card else {
                    Issue.record("\(user) \(card): \(String(describing: entries))")
                    continue
                }
                indexByCard[card, default: []].insert(entry.index)
            }
            #expect(indexByCard.count == cards.count && indexByCard.values.allSatisfy { $0.count == 1 }, "\(user): \(indexByCard)")
            #expect(Set(indexByCard.values.compactMap(\.first)) == Set(0..<Int64(cards.count)), "\(user): \(indexByCard)")
            let history = try await store.pull(userID: user, since: nil, order: .hot, limit: 100).history
            #expect(history.map(\.index) == Array(0..<Int64(cards.count)))
            #expect(Set(history.map(\.card)) == Set(cards))
        }
    }

    /// Promotions at once take the pool's cards one each, best first, as if one by one: each
    /// card once, indexes without gaps, and nothing once the pool is empty.
    @Test(arguments: StoreKind.allCases)
    func concurrentPromotionsTakeEachCardOnce(_ kind: StoreKind) async throws {
        let store = try await kind.makeWithCards().cards
        let cards = (0..<12).map { "card-\($0)" }
        _ = try await store.putCards(cards.map { Self.card($0) })
        _ = try await store.applyScores(cards.enumerated().map { Self.update("u", $1, Double($0), at: 1) })
        let promoted = try await withThrowingTaskGroup(of: CardHistoryEntry?.self) { group in
            for _ in 0..<(cards.count * 2) { group.addTask { try await store.promote(userID: "u", at: Self.epoch)?.entry } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let entries = promoted.compactMap { $0 }.sorted { $0.index < $1.index }
        #expect(entries.map(\.index) == Array(0..<Int64(cards.count)), "\(entries)")
        #expect(entries.map(\.card) == cards.reversed(), "best score first")
    }

    @Test(arguments: StoreKind.allCases)
    func aFullPullCarriesThePoolsAndTheHistorysCardsInIdOrder(_ kind: StoreKind) async throws {
        let store = try await kind.makeWithCards().cards
        _ = try await store.putCards(["d", "a", "c", "b", "e"].map { Self.card($0) })
        _ = try await store.applyScores(["a", "b", "c", "d", "e"].enumerated().map { Self.update("u", $1, Double($0) / 10, at: 1) })
        _ = try await store.markSeen(userID: "u", [SeenReport(card: "b", at: Self.epoch), SeenReport(card: "e", at: Self.epoch)])
        #expect(try await store.deleteCard(id: "d"))
        let pull = try await store.pull(userID: "u", since: nil, order: .hot, limit: 10)
        #expect(pull.pool.map(\.card) == ["c", "a"], "by score, without the deleted card")
        #expect(pull.history.map(\.card) == ["b", "e"])
        #expect(try pull.cards.map { try $0.card() } == ["a", "b", "c", "e"].map { Self.card($0) }, "the pool's and the history's cards, by id, as stored")
    }

    @Test(arguments: StoreKind.allCases)
    func pullAnswersTheChangesSinceAMark(_ kind: StoreKind) async throws {
        let (storage, store) = try await kind.makeWithCards()
        _ = try await store.putCards([Self.card("a", minutes: 1), Self.card("b", minutes: 3), Self.card("c", minutes: 2)])
        _ = try await store.applyScores([Self.update("u", "a", 0.9, at: 1), Self.update("u", "b", 0.1, at: 1), Self.update("u", "c", 0.5, at: 1)])
        let full = try await store.pull(userID: "u", since: nil, order: .hot, limit: 2)
        #expect(full.full)
        #expect(full.pool.map(\.card) == ["a", "c"], "the top two by score")
        #expect(Set(full.cards.map(\.id)) == ["a", "c"])
        #expect(try await store.pull(userID: "u", since: nil, order: .recent, limit: 3).pool.map(\.card) == ["b", "c", "a"], "newest posted first")

        let unchanged = try await store.pull(userID: "u", since: full.mark, order: .hot, limit: 10)
        #expect(!unchanged.full && unchanged.pool.isEmpty && unchanged.cards.isEmpty && unchanged.history.isEmpty)
        #expect(unchanged.mark == full.mark)

        _ = try await store.applyScores([Self.update("u", "b", 0.95, at: 2)])
        _ = try await store.markSeen(userID: "u", [SeenReport(card: "a", at: Self.epoch)])
        _ = try await store.putCards([Card(id: "c", metadata: ["title": .string("new title")], postedAt: Self.epoch)])
        _ = try await store.putCards([Self.card("unrelated")])
        let delta = try await store.pull(userID: "u", since: full.mark, order: .hot, limit: 10)
        #expect(!delta.full)
        #expect(delta.pool == [.init(card: "b", score: 0.95)])
        #expect(delta.poolRemoved == ["a"])
        #expect(delta.history == [CardHistoryEntry(index: 0, card: "a")])
        #expect(Set(delta.cards.map(\.id)) == ["a", "b", "c"], "new pool and history cards, and c's new content; not cards the user does not hold")

        _ = try await store.deleteCard(id: "b")
        let afterDelete = try await store.pull(userID: "u", since: delta.mark, order: .hot, limit: 10)
        #expect(afterDelete.cardsRemoved == ["b"])
        #expect(afterDelete.poolRemoved == ["b"])
        #expect(try await store.pull(userID: "u", since: nil, order: .hot, limit: 10).pool.map(\.card) == ["c"])
        let future = CardMark(cardsClock: afterDelete.mark.cardsClock + 5, userSeq: 0)
        #expect(try await store.pull(userID: "u", since: future, order: .hot, limit: 10).full, "a mark from elsewhere gets everything")
        #expect(try await store.cardState(userID: "u").mark == afterDelete.mark)

        // The rest of a pull's state: the newest history item, the unread count, the settings.
        let empty = try await store.cardState(userID: "u")
        #expect(empty.newestNotification == nil && empty.unread == 0 && empty.settingsJSON == nil)
        let ids = ObjectIDGenerator()
        let (first, second) = (ids.next(), ids.next())
        try await storage.appendHistory([(notificationID: first, userID: "u"), (notificationID: second, userID: "u")], at: Self.epoch)
        _ = try await storage.updateSettings(userID: "u") { $0.enabled = false }
        let state = try await store.cardState(userID: "u")
        #expect(state.newestNotification == second.hex)
        #expect(state.unread == 2)
        #expect(try state.settings().enabled == false)
        #expect(state.mark == afterDelete.mark, "none of these are card changes")
    }

    @Test(arguments: StoreKind.allCases)
    func eventsAreIdempotentCountedAndReactionsMarkSeen(_ kind: StoreKind) async throws {
        let store = try await kind.makeWithCards().cards
        _ = try await store.putCards([Self.card("a"), Self.card("b")])
        _ = try await store.applyScores([Self.update("u", "a", 1, at: 1), Self.update("u", "b", 0.5, at: 1)])
        let events = [
            EngagementEvent(eventID: "e1", userID: "u", type: "reaction", reaction: "ctfo", card: "a", at: Self.epoch),
            EngagementEvent(eventID: "e2", userID: "u", type: "focus", card: "a", at: Self.epoch),
            EngagementEvent(eventID: "e3", userID: "u", type: "track", name: "opened", properties: ["screen": .string("home")], at: Self.epoch),
            EngagementEvent(eventID: "e1", userID: "v", type: "reaction", reaction: "tifb", card: "a", at: Self.epoch),
            EngagementEvent(eventID: "e4", userID: "v", type: "reaction", reaction: "tfu", card: "gone", at: Self.epoch),
        ]
        #expect(try await store.storeEvents(events, at: Self.epoch).count == 5)
        #expect(try await store.storeEvents(events, at: Self.epoch).isEmpty, "the same event ids again are duplicates")
        #expect(try await store.eventStats(card: "a") == CardEventStats(ctfo: 1, tfu: 0, tifb: 1, focus: 1))
        let pull = try await store.pull(userID: "u", since: nil, order: .hot, limit: 10)
        #expect(pull.history == [CardHistoryEntry(index: 0, card: "a")], "a reaction marks its card seen")
        #expect(pull.pool.map(\.card) == ["b"])
        #expect(try await store.purgeEvents(before: Self.epoch.addingTimeInterval(1), limit: 2) == 2)
        #expect(try await store.purgeEvents(before: Self.epoch.addingTimeInterval(1), limit: 100) == 3)
    }

    /// Any interleaving of score updates, seen reports and promotions leaves each unseen card
    /// with its largest-timestamp score, never brings a seen card back, and promotes in score order.
    @Test(arguments: StoreKind.allCases)
    func anyInterleavingConvergesToTheRules(_ kind: StoreKind) async throws {
        var random = SplitMix64(seed: 0x5EED_0000 + UInt64(kind.rawValue.utf8.count))
        for _ in 0..<(kind == .postgres ? 6 : 15) {
            let store = try await kind.makeWithCards().cards
            let cards = (0..<12).map { "c\($0)" }
            _ = try await store.putCards(cards.map { Self.card($0) })
            let users = ["u1", "u2"]
            var updates: [ScoreUpdate] = []
            for _ in 0..<80 {
                // Few distinct timestamps and scores: ties happen.
                updates.append(
                    Self.update(
                        users[Int(random.next() % 2)], cards[Int(random.next() % 12)], Double(random.next() % 5) / 4, at: Double(random.next() % 6)
                    )
                )
            }
            var seen: [String: Set<String>] = [:]
            var pending = updates
            while !pending.isEmpty {
                let take = min(pending.count, Int(random.next() % 12) + 1)
                let start = Int(random.next() % UInt64(pending.count - take + 1))
                _ = try await store.applyScores(Array(pending[start..<start + take]))
                pending.removeSubrange(start..<start + take)
                if random.next() % 4 == 0 {
                    let user = users[Int(random.next() % 2)]
                    let card = cards[Int(random.next() % 12)]
                    _ = try await store.markSeen(userID: user, [SeenReport(card: card, at: Self.epoch)])
                    seen[user, default: []].insert(card)
                }
            }
            for user in users {
                var best: [String: ScoreUpdate] = [:]
                for update in updates where update.userID == user {
                    if let current = best[update.card], !update.supersedes(score: current.score, at: current.timestamp) { continue }
                    best[update.card] = update
                }
                let expected = best.values.filter { !(seen[user] ?? []).contains($0.card) }
                    .sorted { $0.score != $1.score ? $0.score > $1.score : $0.card < $1.card }
                    .map { CardPull.PoolEntry(card: $0.card, score: $0.score) }
                let pull = try await store.pull(userID: user, since: nil, order: .hot, limit: 100)
                #expect(pull.pool == expected, "\(user)")
                #expect(Set(pull.history.map(\.card)) == seen[user] ?? [])
                // Seen cards never come back, whatever arrives later.
                _ = try await store.applyScores((seen[user] ?? []).map { Self.update(user, $0, 9, at: 1_000) })
                var promoted: [String] = []
                while let next = try await store.promote(userID: user, at: Self.epoch) { promoted.append(next.card.id) }
                #expect(promoted == expected.map(\.card), "promotions come out in score order")
                #expect(
                    try await store.pull(userID: user, since: nil, order: .hot, limit: 100).history.map(\.index)
                        == Array(0..<Int64(promoted.count + (seen[user]?.count ?? 0))))
            }
        }
    }
}
