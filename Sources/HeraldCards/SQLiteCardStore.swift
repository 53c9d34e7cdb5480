import Foundation
import GRDB
public import HeraldCore
public import HeraldStore

/// Cards on SQLite (docs/cards.md): the short per-user writes (seen cards, promotions) join the
/// store's group commit of app writes, engagement events have a group commit of their own, and
/// the pull's 304 path answers from memory while no commit has happened since the state was read.
public final class SQLiteCardStore: CardStore {
    let store: SQLiteStore
    /// Engagement events, group-committed: one fsync for every request that arrived meanwhile.
    let events: GroupCommit<StoredEvents, [EngagementEvent]>
    let cardStates = CardStateCache()

    /// - Parameter maxPendingEvents: event uploads that may wait for a group commit at once;
    ///   more are refused with a 503 (`server.max_pending_accepts`).
    public init(store: SQLiteStore, maxPendingEvents: Int = 10_000) {
        self.store = store
        let writer = store.writer
        let file = store.file
        events = GroupCommit(maxWaiting: maxPendingEvents) { batches in
            try SQLiteStore.checkFile(file)
            return try await writer.write { db in try SQLiteCardStore.storeEvents(batches, db) }
        }
    }

    var writer: any DatabaseWriter { store.writer }
    var file: String? { store.file }

    public func putCards(_ cards: [Card]) async throws -> Set<String> {
        guard !cards.isEmpty else { return [] }
        try SQLiteStore.checkFile(file)
        return try await writer.write { db in
            let clock = try Self.tickCardsClock(db)
            var created: Set<String> = []
            for card in cards {
                if try Int.fetchOne(try db.cachedStatement(sql: "SELECT 1 FROM cards WHERE id = ?"), arguments: [card.id]) == nil {
                    created.insert(card.id)
                }
                try db.cachedStatement(
                    sql: """
                        INSERT INTO cards (id, metadata, posted_at, hot, deleted, clock) VALUES (?, ?, ?, ?, 0, ?)
                        ON CONFLICT (id) DO UPDATE SET metadata = excluded.metadata, posted_at = excluded.posted_at, hot = excluded.hot,
                            deleted = 0, clock = excluded.clock
                        """
                ).execute(arguments: [card.id, CardRecords.metadataText(card), SQLiteStore.micros(card.postedAt), card.hot, clock])
            }
            return created
        }
    }

    public func deleteCard(id: String) async throws -> Bool {
        try SQLiteStore.checkFile(file)
        return try await writer.write { db in
            guard let deleted = try Bool.fetchOne(db, sql: "SELECT deleted FROM cards WHERE id = ?", arguments: [id]) else { return false }
            if !deleted {
                let clock = try Self.tickCardsClock(db)
                try db.execute(sql: "UPDATE cards SET deleted = 1, clock = ? WHERE id = ?", arguments: [clock, id])
            }
            return true
        }
    }

    public func applyScores(_ updates: [ScoreUpdate]) async throws -> ScoreReport {
        let (winners, superseded) = ScoreRules.winners(updates)
        guard !winners.isEmpty else { return ScoreReport(stale: superseded) }
        try SQLiteStore.checkFile(file)
        return try await writer.write { db in
            var report = ScoreReport(stale: superseded)
            var live: Set<String> = []
            for chunk in Set(winners.map(\.card)).sorted().chunked(500) {
                live.formUnion(
                    try String.fetchAll(
                        db, sql: "SELECT id FROM cards WHERE deleted = 0 AND id IN (\(SQLiteStore.placeholders(chunk.count)))",
                        arguments: StatementArguments(chunk)
                    )
                )
            }
            let byUser = Dictionary(grouping: winners, by: \.userID)
            for userID in byUser.keys.sorted() {
                var applies: [ScoreUpdate] = []
                for update in byUser[userID] ?? [] {
                    guard live.contains(update.card) else {
                        report.rejected.append(.init(userID: userID, card: update.card, reason: "unknown_card"))
                        continue
                    }
                    let row = try Row.fetchOne(
                        try db.cachedStatement(sql: "SELECT score, score_ts, seen_index FROM user_cards WHERE user_id = ? AND card_id = ?"),
                        arguments: [userID, update.card]
                    )
                    let slot = try row.map {
                        PoolSlot(
                            score: try $0.decode(forColumn: "score"), timestamp: try $0.decode(forColumn: "score_ts"),
                            seen: (try $0.decode(Int64?.self, forColumn: "seen_index")) != nil)
                    }
                    switch ScoreRules.decide(update, over: slot) {
                    case .apply: applies.append(update)
                    case .ignoredSeen: report.ignoredSeen += 1
                    case .stale: report.stale += 1
                    }
                }
                guard !applies.isEmpty else { continue }
                let seq = try Self.tickUser(db, userID).seq
                for update in applies {
                    try db.cachedStatement(
                        sql: """
                            INSERT INTO user_cards (user_id, card_id, score, score_ts, seq) VALUES (?, ?, ?, ?, ?)
                            ON CONFLICT (user_id, card_id) DO UPDATE SET score = excluded.score, score_ts = excluded.score_ts, seq = excluded.seq
                            """
                    ).execute(arguments: [userID, update.card, update.score, update.timestamp, seq])
                }
                report.applied += applies.count
            }
            return report
        }
    }

    public func markSeen(userID: String, _ reports: [SeenReport]) async throws -> [CardHistoryEntry] {
        // A report naming an unknown card fails only its own request (groupCommitted's savepoint).
        try await store.groupCommitted { db in try Self.markSeen(db, userID: userID, reports, unknown: .refuse) }
    }

    public func promote(userID: String, at date: Date) async throws -> (entry: CardHistoryEntry, card: Card)? {
        try await store.groupCommitted { db in
            guard
                let top = try String.fetchOne(
                    db,
                    sql: """
                        SELECT uc.card_id FROM user_cards uc JOIN cards c ON c.id = uc.card_id
                        WHERE uc.user_id = ? AND uc.seen_index IS NULL AND uc.score IS NOT NULL AND c.deleted = 0
                        ORDER BY uc.score DESC, uc.card_id LIMIT 1
                        """,
                    arguments: [userID]
                )
            else { return nil }
            guard let entry = try Self.markSeen(db, userID: userID, [SeenReport(card: top, at: date)], unknown: .refuse).first,
                let card = try Self.cards(db, ids: [top]).first
            else { return nil }
            return (entry, try card.card())
        }
    }

    public func cardState(userID: String) async throws -> CardState {
        let commits = store.commits.value
        if let state = cardStates.state(userID: userID, commits: commits) { return state }
        let state = try await writer.unsafeRead { db in
            // One statement, so no transaction is needed for a consistent answer.
            guard
                let row = try Row.fetchOne(
                    try db.cachedStatement(
                        sql: """
                            SELECT (SELECT value FROM card_clock WHERE id = 1) AS clock,
                                (SELECT seq FROM card_users WHERE user_id = ?1) AS seq,
                                (SELECT notification_id FROM history WHERE user_id = ?1 ORDER BY seq DESC LIMIT 1) AS newest,
                                (SELECT SUM(CASE WHEN unread > 0 THEN unread ELSE 0 END) FROM inbox_counts WHERE user_id = ?1) AS unread,
                                (SELECT settings FROM users WHERE id = ?1) AS settings
                            """
                    ),
                    arguments: [userID]
                )
            else { throw StoredRecords.corrupt("card_clock", "missing") }
            return CardState(
                mark: CardMark(cardsClock: (try row.decode(forColumn: "clock")) ?? 0, userSeq: (try row.decode(forColumn: "seq")) ?? 0),
                newestNotification: try row.decode(forColumn: "newest"), unread: (try row.decode(forColumn: "unread")) ?? 0,
                settingsJSON: try row.decode(forColumn: "settings")
            )
        }
        cardStates.remember(state, userID: userID, commits: commits)
        return state
    }

    public func pull(userID: String, since: CardMark?, order: PoolOrder, limit: Int) async throws -> CardPull {
        try await writer.read { db in
            let mark = try Self.cardMark(db, userID: userID)
            guard let since, since.cardsClock <= mark.cardsClock, since.userSeq <= mark.userSeq else {
                return try Self.fullPull(db, userID: userID, mark: mark, order: order, limit: limit)
            }
            let slots = try Row.fetchAll(
                db,
                sql: """
                    SELECT uc.card_id, uc.score, uc.seen_index, COALESCE(c.deleted, 1) AS deleted
                    FROM user_cards uc LEFT JOIN cards c ON c.id = uc.card_id WHERE uc.user_id = ? AND uc.seq > ?
                    """,
                arguments: [userID, since.userSeq]
            ).map { row in
                CardRecords.ChangedSlot(
                    card: try row.decode(atIndex: 0), score: try row.decode(atIndex: 1), seenIndex: try row.decode(atIndex: 2),
                    deleted: try row.decode(atIndex: 3))
            }
            let changedCards = try Row.fetchAll(
                db,
                sql: "SELECT c.id, c.deleted FROM cards c JOIN user_cards uc ON uc.card_id = c.id AND uc.user_id = ? WHERE c.clock > ?",
                arguments: [userID, since.cardsClock]
            ).map { CardRecords.ChangedCard(id: try $0.decode(atIndex: 0), deleted: try $0.decode(atIndex: 1)) }
            return try CardRecords.delta(mark: mark, slots: slots, changedCards: changedCards, order: order) { try Self.cards(db, ids: $0) }
        }
    }

    public func storeEvents(_ events: [EngagementEvent], at date: Date) async throws -> [EngagementEvent] {
        guard !events.isEmpty else { return [] }
        try SQLiteStore.checkFile(file)
        return try await self.events.submit(StoredEvents(events: events, at: date))
    }

    /// One group commit of several requests' events.
    static func storeEvents(_ batches: [StoredEvents], _ db: Database) throws -> [[EngagementEvent]] {
        try batches.map { batch in
            var stored: [EngagementEvent] = []
            for event in batch.events {
                try db.cachedStatement(
                    sql: """
                        INSERT INTO events (user_id, event_id, type, reaction, card, name, properties, at, received_at)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (user_id, event_id) DO NOTHING
                        """
                ).execute(arguments: [
                    event.userID, event.eventID, event.type, event.reaction, event.card, event.name,
                    JSONValue.object(event.properties).canonicalText, SQLiteStore.micros(event.at), SQLiteStore.micros(batch.at),
                ])
                guard db.changesCount > 0 else { continue }
                stored.append(event)
                if event.type == "reaction", let card = event.card {
                    _ = try markSeen(db, userID: event.userID, [SeenReport(card: card, at: event.at)], unknown: .skip)
                }
            }
            return stored
        }
    }

    public func eventStats(card: String) async throws -> CardEventStats {
        try await writer.read { db in
            var stats = CardEventStats()
            for row in try Row.fetchAll(
                db, sql: "SELECT type, reaction, COUNT(*) AS n FROM events WHERE card = ? GROUP BY type, reaction", arguments: [card]
            ) {
                CardRecords.tally(
                    &stats, type: try row.decode(forColumn: "type"), reaction: try row.decode(forColumn: "reaction"), count: try row.decode(forColumn: "n"))
            }
            return stats
        }
    }

    public func purgeEvents(before: Date, limit: Int) async throws -> Int {
        try await writer.write { db in
            try db.execute(
                sql: "DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE received_at < ? LIMIT ?)", arguments: [SQLiteStore.micros(before), limit]
            )
            return db.changesCount
        }
    }

    // MARK: - Pieces

    enum UnknownCards { case refuse, skip }

    /// See ``CardStore/markSeen(userID:_:)``; reactions to cards never stored are skipped.
    static func markSeen(_ db: Database, userID: String, _ reports: [SeenReport], unknown: UnknownCards) throws -> [CardHistoryEntry] {
        var entries: [CardHistoryEntry] = []
        var pending: [SeenReport] = []
        for report in CardRecords.ordered(reports) {
            if let index = try Int64.fetchOne(
                try db.cachedStatement(sql: "SELECT seen_index FROM user_cards WHERE user_id = ? AND card_id = ? AND seen_index IS NOT NULL"),
                arguments: [userID, report.card]
            ) {
                entries.append(CardHistoryEntry(index: index, card: report.card))
            } else if try Int.fetchOne(try db.cachedStatement(sql: "SELECT 1 FROM cards WHERE id = ?"), arguments: [report.card]) != nil {
                pending.append(report)
            } else if unknown == .refuse {
                throw CardRecords.unknownCard(report.card)
            }
        }
        if !pending.isEmpty {
            let (seq, first) = try tickUser(db, userID)
            // The row is outside input: an index past Int64's range would trap the process.
            guard first >= 0, first <= Int64.max - Int64(pending.count) else {
                throw HeraldError(.internal, code: "storage_corrupt", "card_users.next_index holds \(first), out of range for \(pending.count) more cards")
            }
            for (offset, report) in pending.enumerated() {
                let index = first + Int64(offset)
                try db.cachedStatement(
                    sql: """
                        INSERT INTO user_cards (user_id, card_id, seen_index, seen_at, seq) VALUES (?, ?, ?, ?, ?)
                        ON CONFLICT (user_id, card_id) DO UPDATE SET seen_index = excluded.seen_index, seen_at = excluded.seen_at, seq = excluded.seq
                        """
                ).execute(arguments: [userID, report.card, index, SQLiteStore.micros(report.at), seq])
                entries.append(CardHistoryEntry(index: index, card: report.card))
            }
            try db.execute(sql: "UPDATE card_users SET next_index = ? WHERE user_id = ?", arguments: [first + Int64(pending.count), userID])
        }
        return entries.sorted { $0.index < $1.index }
    }

    static func tickCardsClock(_ db: Database) throws -> Int64 {
        guard let value = try Int64.fetchOne(db, sql: "UPDATE card_clock SET value = value + 1 WHERE id = 1 RETURNING value") else {
            throw StoredRecords.corrupt("card_clock", "missing")
        }
        return value
    }

    /// Counts one change to the user's cards. - Returns: its number and the next history index.
    static func tickUser(_ db: Database, _ userID: String) throws -> (seq: Int64, nextIndex: Int64) {
        guard
            let row = try Row.fetchOne(
                try db.cachedStatement(
                    sql: """
                        INSERT INTO card_users (user_id, seq, next_index) VALUES (?, 1, 0)
                        ON CONFLICT (user_id) DO UPDATE SET seq = seq + 1 RETURNING seq, next_index
                        """
                ),
                arguments: [userID]
            )
        else { throw StoredRecords.corrupt("card_users", userID) }
        return (try row.decode(forColumn: "seq"), try row.decode(forColumn: "next_index"))
    }

    static func cardMark(_ db: Database, userID: String) throws -> CardMark {
        CardMark(
            cardsClock: try Int64.fetchOne(db, sql: "SELECT value FROM card_clock WHERE id = 1") ?? 0,
            userSeq: try Int64.fetchOne(try db.cachedStatement(sql: "SELECT seq FROM card_users WHERE user_id = ?"), arguments: [userID]) ?? 0
        )
    }

    /// The live (not deleted) cards among `ids`, by id.
    static func cards(_ db: Database, ids: [String]) throws -> [CardContent] {
        var cards: [CardContent] = []
        for chunk in ids.chunked(500) {
            cards += try Row.fetchAll(
                db, sql: "SELECT id, metadata, posted_at, hot FROM cards WHERE deleted = 0 AND id IN (\(SQLiteStore.placeholders(chunk.count))) ORDER BY id",
                arguments: StatementArguments(chunk)
            ).map {
                CardRecords.card(
                    id: try $0.decode(atIndex: 0), metadata: try $0.decode(atIndex: 1), postedAt: try $0.decode(atIndex: 2), hot: try $0.decode(atIndex: 3))
            }
        }
        return cards
    }

    static func fullPull(_ db: Database, userID: String, mark: CardMark, order: PoolOrder, limit: Int) throws -> CardPull {
        let ordering = order == .hot ? "uc.score DESC, uc.card_id" : "c.posted_at DESC, uc.card_id"
        // The pool's cards come with it (the join reads their rows anyway); only the history's
        // are looked up again. A card is in one or the other: history rows are the seen ones.
        var pool: [CardPull.PoolEntry] = []
        var cards: [CardContent] = []
        let rows = try Row.fetchCursor(
            try db.cachedStatement(
                sql: """
                    SELECT uc.card_id, uc.score, c.metadata, c.posted_at, c.hot FROM user_cards uc JOIN cards c ON c.id = uc.card_id
                    WHERE uc.user_id = ? AND uc.seen_index IS NULL AND uc.score IS NOT NULL AND c.deleted = 0
                    ORDER BY \(ordering) LIMIT ?
                    """),
            arguments: [userID, limit])
        while let row = try rows.next() {
            let id: String = try row.decode(atIndex: 0)
            pool.append(CardPull.PoolEntry(card: id, score: try row.decode(atIndex: 1)))
            cards.append(CardRecords.card(id: id, metadata: try row.decode(atIndex: 2), postedAt: try row.decode(atIndex: 3), hot: try row.decode(atIndex: 4)))
        }
        let history = try Row.fetchAll(
            try db.cachedStatement(sql: "SELECT card_id, seen_index FROM user_cards WHERE user_id = ? AND seen_index IS NOT NULL ORDER BY seen_index"),
            arguments: [userID]
        ).map { CardHistoryEntry(index: try $0.decode(atIndex: 1), card: try $0.decode(atIndex: 0)) }
        cards += try Self.cards(db, ids: Array(Set(history.map(\.card))).sorted())
        cards.sort { $0.id < $1.id }
        return CardPull(mark: mark, full: true, cards: cards, cardsRemoved: [], pool: pool, poolRemoved: [], history: history)
    }
}

/// One request's events, waiting for a group commit.
struct StoredEvents: Sendable {
    var events: [EngagementEvent]
    var at: Date
}
