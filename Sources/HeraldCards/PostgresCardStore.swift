import Foundation
public import HeraldCore
public import HeraldStore
import PostgresNIO

/// Cards on PostgreSQL. Several processes write at once, so the order of changes comes from
/// row locks: the single `card_clock` row serialises card writes, and a user's `card_users`
/// row serialises changes to that user's pool and history (always locked in user-id order).
/// A counter read after commit therefore covers every change numbered up to it.
public final class PostgresCardStore: CardStore {
    let store: PostgresStore
    /// Engagement events, group-committed: one transaction for every request that arrived meanwhile.
    let events: GroupCommit<StoredEvents, [EngagementEvent]>

    /// - Parameter maxPendingEvents: event uploads that may wait for a group commit at once;
    ///   more are refused with a 503 (`server.max_pending_accepts`).
    public init(store: PostgresStore, maxPendingEvents: Int = 10_000) {
        self.store = store
        events = GroupCommit(maxWaiting: maxPendingEvents) { batches in
            try await store.transaction { session in try await PostgresCardStore.storeEvents(batches, session) }
        }
    }

    public func putCards(_ cards: [Card]) async throws -> Set<String> {
        guard !cards.isEmpty else { return [] }
        return try await store.transaction { session in
            let clock = try await Self.tickCardsClock(session)
            let ids = cards.map(\.id)
            let existing = Set(try await session.rows("SELECT id FROM cards WHERE id = ANY(\(ids))").map { try $0.text("id") })
            let metadata = cards.map(CardRecords.metadataText)
            let posted = cards.map { PostgresStore.micros($0.postedAt) }
            // Arrays cannot carry NULLs here: a missing hot travels as NaN and becomes NULL again.
            let hot = cards.map { $0.hot ?? .nan }
            try await session.execute(
                """
                INSERT INTO cards (id, metadata, posted_at, hot, deleted, clock)
                SELECT id, metadata, posted_at, NULLIF(hot, 'NaN'::float8), 0, \(clock)
                FROM UNNEST(\(ids)::text[], \(metadata)::text[], \(posted)::bigint[], \(hot)::float8[]) AS u(id, metadata, posted_at, hot)
                ON CONFLICT (id) DO UPDATE SET metadata = excluded.metadata, posted_at = excluded.posted_at, hot = excluded.hot,
                    deleted = 0, clock = excluded.clock
                """
            )
            return Set(ids).subtracting(existing)
        }
    }

    public func deleteCard(id: String) async throws -> Bool {
        try await store.transaction { session in
            guard let row = try await session.row("SELECT deleted FROM cards WHERE id = \(id) FOR UPDATE") else { return false }
            if try row.integer("deleted") == 0 {
                let clock = try await Self.tickCardsClock(session)
                try await session.execute("UPDATE cards SET deleted = 1, clock = \(clock) WHERE id = \(id)")
            }
            return true
        }
    }

    public func applyScores(_ updates: [ScoreUpdate]) async throws -> ScoreReport {
        let (winners, superseded) = ScoreRules.winners(updates)
        guard !winners.isEmpty else { return ScoreReport(stale: superseded) }
        return try await store.transaction { session in
            var report = ScoreReport(stale: superseded)
            let cardIDs = Array(Set(winners.map(\.card)))
            let live = Set(try await session.rows("SELECT id FROM cards WHERE deleted = 0 AND id = ANY(\(cardIDs))").map { try $0.text("id") })
            var known: [ScoreUpdate] = []
            for update in winners {
                if live.contains(update.card) {
                    known.append(update)
                } else {
                    report.rejected.append(.init(userID: update.userID, card: update.card, reason: "unknown_card"))
                }
            }
            guard !known.isEmpty else { return report }
            try await Self.lockUsers(Set(known.map(\.userID)), session)
            var slots: [String: PoolSlot] = [:]
            let users = known.map(\.userID)
            let cards = known.map(\.card)
            for row in try await session.rows(
                """
                SELECT uc.user_id, uc.card_id, uc.score, uc.score_ts, uc.seen_index IS NOT NULL AS seen
                FROM user_cards uc JOIN UNNEST(\(users)::text[], \(cards)::text[]) AS u(user_id, card_id)
                    ON uc.user_id = u.user_id AND uc.card_id = u.card_id
                """
            ) {
                let slot = PoolSlot(
                    score: try row.cell("score").decode(Double?.self), timestamp: try row.cell("score_ts").decode(Double?.self),
                    seen: try row.cell("seen").decode(Bool.self)
                )
                slots[try row.text("user_id") + "\u{0}" + (try row.text("card_id"))] = slot
            }
            var applies: [ScoreUpdate] = []
            for update in known {
                switch ScoreRules.decide(update, over: slots[update.userID + "\u{0}" + update.card]) {
                case .apply: applies.append(update)
                case .ignoredSeen: report.ignoredSeen += 1
                case .stale: report.stale += 1
                }
            }
            guard !applies.isEmpty else { return report }
            var seqs: [String: Int64] = [:]
            let touched = Array(Set(applies.map(\.userID))).sorted()
            for row in try await session.rows("UPDATE card_users SET seq = seq + 1 WHERE user_id = ANY(\(touched)) RETURNING user_id, seq") {
                seqs[try row.text("user_id")] = try row.integer("seq")
            }
            let seq = applies.map { seqs[$0.userID] ?? 0 }
            try await session.execute(
                """
                INSERT INTO user_cards (user_id, card_id, score, score_ts, seq)
                SELECT * FROM UNNEST(\(applies.map(\.userID))::text[], \(applies.map(\.card))::text[], \(applies.map(\.score))::float8[],
                    \(applies.map(\.timestamp))::float8[], \(seq)::bigint[])
                ON CONFLICT (user_id, card_id) DO UPDATE SET score = excluded.score, score_ts = excluded.score_ts, seq = excluded.seq
                """
            )
            report.applied = applies.count
            return report
        }
    }

    public func markSeen(userID: String, _ reports: [SeenReport]) async throws -> [CardHistoryEntry] {
        try await store.transaction { session in
            try await Self.lockUsers([userID], session)
            return try await Self.markSeen(session, userID: userID, reports, unknown: .refuse)
        }
    }

    public func promote(userID: String, at date: Date) async throws -> (entry: CardHistoryEntry, card: Card)? {
        try await store.transaction { session in
            try await Self.lockUsers([userID], session)
            guard
                let top = try await session.row(
                    """
                    SELECT uc.card_id FROM user_cards uc JOIN cards c ON c.id = uc.card_id
                    WHERE uc.user_id = \(userID) AND uc.seen_index IS NULL AND uc.score IS NOT NULL AND c.deleted = 0
                    ORDER BY uc.score DESC, uc.card_id COLLATE "C" LIMIT 1
                    """
                )
            else { return nil }
            let id = try top.text("card_id")
            guard let entry = try await Self.markSeen(session, userID: userID, [SeenReport(card: id, at: date)], unknown: .refuse).first,
                let card = try await Self.cards(session, ids: [id]).first
            else { return nil }
            return (entry, try card.card())
        }
    }

    public func cardState(userID: String) async throws -> CardState {
        try await store.withConnection { session in
            guard let row = try await session.row(CardStateStatement(userID: userID)) else { throw StoredRecords.corrupt("card_clock", "missing") }
            return CardState(
                mark: CardMark(cardsClock: try row.optionalInteger("clock") ?? 0, userSeq: try row.optionalInteger("seq") ?? 0),
                newestNotification: try row.optionalText("newest"), unread: try row.optionalInteger("unread").map(Int.init) ?? 0,
                settingsJSON: try row.optionalText("settings")
            )
        }
    }

    /// What the pull's ETag is made of, in one read: the statement every poll runs, prepared.
    /// Its plan names every history month (the newest row is found per month and merged), and
    /// planning it took about 1.3 ms against 0.4 ms to run it (docs/performance.md, "The cards'
    /// 304 on PostgreSQL").
    struct CardStateStatement: HeraldStore.PreparedQuery {
        static let name = "herald_card_state"
        static let sql = CardStateStatement(userID: "").query.sql
        let query: PostgresQuery

        init(userID: String) {
            query = """
                SELECT (SELECT value FROM card_clock WHERE id = 1) AS clock,
                    (SELECT seq FROM card_users WHERE user_id = \(userID)) AS seq,
                    (SELECT notification_id FROM history WHERE user_id = \(userID) ORDER BY seq DESC LIMIT 1) AS newest,
                    (SELECT CAST(SUM(CASE WHEN unread > 0 THEN unread ELSE 0 END) AS BIGINT) FROM inbox_counts WHERE user_id = \(userID)) AS unread,
                    (SELECT settings FROM users WHERE id = \(userID)) AS settings
                """
        }
    }

    public func pull(userID: String, since: CardMark?, order: PoolOrder, limit: Int) async throws -> CardPull {
        try await store.withConnection { session in
            // The mark first: a change committed after it has a higher number and comes again next time.
            let mark = try await Self.cardMark(session, userID: userID)
            guard let since, since.cardsClock <= mark.cardsClock, since.userSeq <= mark.userSeq else {
                return try await Self.fullPull(session, userID: userID, mark: mark, order: order, limit: limit)
            }
            var slots: [CardRecords.ChangedSlot] = []
            for row in try await session.rows(
                """
                SELECT uc.card_id, uc.score, uc.seen_index, COALESCE(c.deleted, 1) AS deleted
                FROM user_cards uc LEFT JOIN cards c ON c.id = uc.card_id WHERE uc.user_id = \(userID) AND uc.seq > \(since.userSeq)
                """
            ) {
                slots.append(
                    .init(
                        card: try row.text("card_id"), score: try row.cell("score").decode(Double?.self), seenIndex: try row.optionalInteger("seen_index"),
                        deleted: try row.integer("deleted") != 0
                    )
                )
            }
            var changed: [CardRecords.ChangedCard] = []
            for row in try await session.rows(
                """
                SELECT c.id, c.deleted FROM cards c JOIN user_cards uc ON uc.card_id = c.id AND uc.user_id = \(userID)
                WHERE c.clock > \(since.cardsClock)
                """
            ) {
                changed.append(.init(id: try row.text("id"), deleted: try row.integer("deleted") != 0))
            }
            let mentioned = try await Self.cards(session, ids: Self.mentioned(slots: slots, changed: changed))
            return try CardRecords.delta(mark: mark, slots: slots, changedCards: changed, order: order) { ids in
                let wanted = Set(ids)
                return mentioned.filter { wanted.contains($0.id) }
            }
        }
    }

    /// Every card a delta could need the content of (its fetch cannot be async).
    static func mentioned(slots: [CardRecords.ChangedSlot], changed: [CardRecords.ChangedCard]) -> [String] {
        Array(Set(slots.filter { !$0.deleted }.map(\.card) + changed.filter { !$0.deleted }.map(\.id))).sorted()
    }

    public func storeEvents(_ events: [EngagementEvent], at date: Date) async throws -> [EngagementEvent] {
        guard !events.isEmpty else { return [] }
        return try await self.events.submit(StoredEvents(events: events, at: date))
    }

    static func storeEvents(_ batches: [StoredEvents], _ session: PostgresSession) async throws -> [[EngagementEvent]] {
        // An event id is unique per user, and on a partitioned table (docs/durability.md, "Month
        // partitions on PostgreSQL") each month only knows its own: a user's events are stored
        // one transaction at a time, under a lock taken first and in order, and the other months
        // are looked in before each insert.
        let users = Array(Set(batches.flatMap { $0.events.map(\.userID) }))
        try await session.execute(
            """
            SELECT pg_advisory_xact_lock(\(MonthPartitionedTable.eventUserLock), h)
            FROM (SELECT DISTINCT hashtext(u) AS h FROM UNNEST(\(users)::text[]) AS u ORDER BY 1) AS ordered
            """
        )
        // Reactions change their users' histories: those rows are locked next, in order.
        let reacting = Set(batches.flatMap { $0.events.filter { $0.type == "reaction" && $0.card != nil }.map(\.userID) })
        if !reacting.isEmpty { try await lockUsers(reacting, session) }
        var results: [[EngagementEvent]] = []
        for batch in batches {
            let events = batch.events
            let inserted = try await session.rows(
                """
                INSERT INTO events (user_id, event_id, type, reaction, card, name, properties, at, received_at)
                SELECT user_id, event_id, type, NULLIF(reaction, ''), NULLIF(card, ''), NULLIF(name, ''), properties, at, \(PostgresStore.micros(batch.at))
                FROM UNNEST(\(events.map(\.userID))::text[], \(events.map(\.eventID))::text[], \(events.map(\.type))::text[],
                    \(events.map { $0.reaction ?? "" })::text[], \(events.map { $0.card ?? "" })::text[], \(events.map { $0.name ?? "" })::text[],
                    \(events.map { JSONValue.object($0.properties).canonicalText })::text[], \(events.map { PostgresStore.micros($0.at) })::bigint[])
                    AS u(user_id, event_id, type, reaction, card, name, properties, at)
                WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.user_id = u.user_id AND e.event_id = u.event_id)
                ON CONFLICT DO NOTHING
                RETURNING user_id, event_id
                """
            )
            var new: Set<String> = []
            for row in inserted { new.insert(try row.text("user_id") + "\u{0}" + (try row.text("event_id"))) }
            var stored: [EngagementEvent] = []
            for event in events where new.remove(event.userID + "\u{0}" + event.eventID) != nil {
                stored.append(event)
                if event.type == "reaction", let card = event.card {
                    _ = try await markSeen(session, userID: event.userID, [SeenReport(card: card, at: event.at)], unknown: .skip)
                }
            }
            results.append(stored)
        }
        return results
    }

    public func eventStats(card: String) async throws -> CardEventStats {
        try await store.withConnection { session in
            var stats = CardEventStats()
            for row in try await session.rows("SELECT type, reaction, COUNT(*) AS n FROM events WHERE card = \(card) GROUP BY type, reaction") {
                CardRecords.tally(&stats, type: try row.text("type"), reaction: try row.optionalText("reaction"), count: try row.int("n"))
            }
            return stats
        }
    }

    /// Whole months go first (``PostgresStore/dropExpiredPartitions(of:before:)``), then one batch.
    /// Its rows are found by `seq` from an array, in the months the cutoff leaves: `seq IN
    /// (SELECT ...)` was planned as a hash join over every month's rows, 0.2 s a batch on a
    /// seeded year's 400 000 events against 7 ms (docs/performance.md).
    public func purgeEvents(before: Date, limit: Int) async throws -> Int {
        let dropped = try await store.dropExpiredPartitions(of: .events, before: before)
        let cutoff = PostgresStore.micros(before)
        return try await dropped
            + store.purge(
                """
                DELETE FROM events WHERE received_at < \(cutoff)
                    AND seq = ANY(ARRAY(SELECT seq FROM events WHERE received_at < \(cutoff) LIMIT \(limit))) RETURNING seq
                """)
    }

    // MARK: - Pieces

    enum UnknownCards { case refuse, skip }

    /// See ``CardStore/markSeen(userID:_:)``. The user's row must be locked.
    static func markSeen(_ session: PostgresSession, userID: String, _ reports: [SeenReport], unknown: UnknownCards) async throws -> [CardHistoryEntry] {
        let ordered = CardRecords.ordered(reports)
        guard !ordered.isEmpty else { return [] }
        let ids = ordered.map(\.card)
        var seen: [String: Int64] = [:]
        for row in try await session.rows(
            "SELECT card_id, seen_index FROM user_cards WHERE user_id = \(userID) AND card_id = ANY(\(ids)) AND seen_index IS NOT NULL"
        ) {
            seen[try row.text("card_id")] = try row.integer("seen_index")
        }
        let stored = Set(try await session.rows("SELECT id FROM cards WHERE id = ANY(\(ids))").map { try $0.text("id") })
        var entries: [CardHistoryEntry] = []
        var pending: [SeenReport] = []
        for report in ordered {
            if let index = seen[report.card] {
                entries.append(CardHistoryEntry(index: index, card: report.card))
            } else if stored.contains(report.card) {
                pending.append(report)
            } else if unknown == .refuse {
                throw CardRecords.unknownCard(report.card)
            }
        }
        guard !pending.isEmpty else { return entries.sorted { $0.index < $1.index } }
        guard
            let user = try await session.row(
                """
                UPDATE card_users SET seq = seq + 1, next_index = next_index + \(Int64(pending.count)) WHERE user_id = \(userID)
                RETURNING seq, next_index - \(Int64(pending.count)) AS first
                """
            )
        else { throw StoredRecords.corrupt("card_users", userID) }
        let seq = try user.integer("seq")
        let first = try user.integer("first")
        let indexes = pending.indices.map { first + Int64($0) }
        try await session.execute(
            """
            INSERT INTO user_cards (user_id, card_id, seen_index, seen_at, seq)
            SELECT \(userID), card_id, seen_index, seen_at, \(seq)
            FROM UNNEST(\(pending.map(\.card))::text[], \(indexes)::bigint[], \(pending.map { PostgresStore.micros($0.at) })::bigint[]) AS u(card_id, seen_index, seen_at)
            ON CONFLICT (user_id, card_id) DO UPDATE SET seen_index = excluded.seen_index, seen_at = excluded.seen_at, seq = excluded.seq
            """
        )
        entries += zip(indexes, pending).map { CardHistoryEntry(index: $0, card: $1.card) }
        return entries.sorted { $0.index < $1.index }
    }

    static func tickCardsClock(_ session: PostgresSession) async throws -> Int64 {
        guard let row = try await session.row("UPDATE card_clock SET value = value + 1 WHERE id = 1 RETURNING value") else {
            throw StoredRecords.corrupt("card_clock", "missing")
        }
        return try row.integer("value")
    }

    /// Creates the users' counters if needed and locks them, in user-id order, until the transaction ends.
    static func lockUsers(_ users: Set<String>, _ session: PostgresSession) async throws {
        // One upsert that locks what it finds: an insert that did nothing, then a `FOR UPDATE`,
        // found no row when an erasure deleted it in between (the lock waited for the erasure,
        // then skipped the deleted row), and the write went on without its counter, a 500.
        try await session.execute(
            """
            INSERT INTO card_users (user_id, seq, next_index) SELECT id, 0, 0 FROM UNNEST(\(users.sorted())::text[]) AS u(id) ORDER BY id
            ON CONFLICT (user_id) DO UPDATE SET seq = card_users.seq
            """
        )
    }

    static func cardMark(_ session: PostgresSession, userID: String) async throws -> CardMark {
        let clock = try await session.row("SELECT value FROM card_clock WHERE id = 1")
        let user = try await session.row("SELECT seq FROM card_users WHERE user_id = \(userID)")
        return CardMark(cardsClock: try clock?.integer("value") ?? 0, userSeq: try user?.integer("seq") ?? 0)
    }

    /// The live (not deleted) cards among `ids`, by id.
    static func cards(_ session: PostgresSession, ids: [String]) async throws -> [CardContent] {
        guard !ids.isEmpty else { return [] }
        return try await session.rows("SELECT id, metadata, posted_at, hot FROM cards WHERE deleted = 0 AND id = ANY(\(ids)) ORDER BY id COLLATE \"C\"").map {
            row in
            CardRecords.card(
                id: try row.text("id"), metadata: try row.text("metadata"), postedAt: try row.integer("posted_at"),
                hot: try row.cell("hot").decode(Double?.self)
            )
        }
    }

    static func fullPull(_ session: PostgresSession, userID: String, mark: CardMark, order: PoolOrder, limit: Int) async throws -> CardPull {
        // Ties by the card id's bytes, as SQLite and CardRecords.sorted order them, whatever the
        // database's collation (an `en_US` one puts `a` before `B`).
        let ordering = (order == .hot ? "uc.score DESC" : "c.posted_at DESC") + ", uc.card_id COLLATE \"C\""
        // The pool's cards come with it (the join reads their rows anyway); only the history's
        // are looked up again. A card is in one or the other: history rows are the seen ones.
        let rows = try await session.rows(
            PostgresQuery(
                unsafeSQL: """
                    SELECT uc.card_id, uc.score, c.metadata, c.posted_at, c.hot FROM user_cards uc JOIN cards c ON c.id = uc.card_id
                    WHERE uc.user_id = $1 AND uc.seen_index IS NULL AND uc.score IS NOT NULL AND c.deleted = 0
                    ORDER BY \(ordering) LIMIT $2
                    """,
                binds: {
                    var binds = PostgresBindings()
                    binds.append(userID)
                    binds.append(Int64(limit))
                    return binds
                }()
            )
        )
        var pool: [CardPull.PoolEntry] = []
        var cards: [CardContent] = []
        for row in rows {
            let id = try row.text("card_id")
            pool.append(CardPull.PoolEntry(card: id, score: try row.cell("score").decode(Double.self)))
            cards.append(
                CardRecords.card(
                    id: id, metadata: try row.text("metadata"), postedAt: try row.integer("posted_at"), hot: try row.cell("hot").decode(Double?.self)))
        }
        let history = try await session.rows(
            "SELECT card_id, seen_index FROM user_cards WHERE user_id = \(userID) AND seen_index IS NOT NULL ORDER BY seen_index"
        ).map { CardHistoryEntry(index: try $0.integer("seen_index"), card: try $0.text("card_id")) }
        cards += try await Self.cards(session, ids: Array(Set(history.map(\.card))).sorted())
        cards.sort { $0.id < $1.id }
        return CardPull(mark: mark, full: true, cards: cards, cardsRemoved: [], pool: pool, poolRemoved: [], history: history)
    }
}
