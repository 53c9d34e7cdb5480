public import Foundation
public import HeraldCore
public import HeraldStore

/// ``InboxStore`` on either engine, each statement written once (``SharedStatement``): the
/// state columns of `history` and the `inbox_counts` counters, which every history write keeps
/// in its own transaction (InboxSQL in HeraldStore: triggers, and SQLite's inserts).
public struct SharedInboxStore: InboxStore {
    let database: any SharedSQLDatabase
    /// Counts read since the database last committed, by user: answered without a read.
    let remembered: RememberedCounts?

    /// A store on `database`. With `commitCount` (the count of the one writing process's
    /// commits, as SQLite has: ``CommitCounter``), counts read are remembered and answered from
    /// memory while nothing was committed since; without it (PostgreSQL, several processes)
    /// every count is read.
    public init(database: any SharedSQLDatabase, commitCount: (@Sendable () -> Int)? = nil) {
        self.database = database
        self.remembered = commitCount.map(RememberedCounts.init)
    }

    /// Users per badge query: well under both engines' parameter limits.
    static let badgeChunk = 500

    public func mark(userID: String, _ selection: InboxSelection, _ change: InboxChange, at now: Date) async throws -> InboxMarkResult {
        if case .ids(let ids) = selection, ids.isEmpty { return InboxMarkResult(counts: try await counts(userID: userID), changed: 0) }
        // Numbered in the order they appear in the text: SET first.
        let update = SharedStatement.numbering { parameter in
            let (assignment, unchanged) = Self.assignment(change, parameter)
            var conditions = ["user_id = \(parameter(.text(userID)))", unchanged]
            switch selection {
            case .ids(let ids):
                conditions.append("notification_id IN (\(ids.map { parameter(.text($0.hex)) }.joined(separator: ", ")))")
            case .all(let type, let before):
                if let type { conditions.append("type = \(parameter(.text(type)))") }
                if let before { conditions.append("created_at < \(parameter(.integer(Timestamp.microseconds(before))))") }
            }
            return "UPDATE history SET \(assignment) WHERE \(conditions.joined(separator: " AND ")) RETURNING seq"
        }
        let results = try await database.results(of: [update, Self.countsQuery(userID)], announcing: .inbox(users: [userID]))
        return InboxMarkResult(counts: try Self.counts(results.last ?? []), changed: results.first?.count ?? 0)
    }

    /// What `change` sets, and the condition of an item it would change (so an item already in
    /// that state is left alone and not counted as changed). Reading implies seeing.
    static func assignment(_ change: InboxChange, _ parameter: (SharedStatement.Value) -> String) -> (String, String) {
        switch change {
        // An unseen item is unread (reading implies seeing): `read = 0` finds it by the index
        // of unread items.
        case .seen: ("seen = 1", "read = 0 AND seen = 0")
        case .read: ("read = 1, seen = 1", "read = 0")
        case .unread: ("read = 0", "read = 1")
        case .archived: ("archived = 1", "archived = 0")
        case .unarchived: ("archived = 0", "archived = 1")
        case .snooze(let until):
            {
                let value = parameter(.integer(Timestamp.microseconds(until)))
                return ("snoozed_until = \(value)", "(snoozed_until IS NULL OR snoozed_until <> \(value))")
            }()
        }
    }

    public func counts(userID: String) async throws -> InboxCounts {
        guard let remembered else { return try Self.counts(try await database.rows(Self.countsQuery(userID))) }
        // Counted before the read: a commit during it makes what is remembered stale at once.
        let commits = remembered.commitCount()
        if let counts = remembered.counts(userID: userID, commits: commits) { return counts }
        let counts = try Self.counts(try await database.rows(Self.countsQuery(userID)))
        remembered.remember(counts, userID: userID, commits: commits)
        return counts
    }

    static func countsQuery(_ userID: String) -> SharedStatement {
        SharedStatement("SELECT type, unseen, unread, archived FROM inbox_counts WHERE user_id = $1", .text(userID))
    }

    /// The counts from a user's counter rows. A counter below zero would be a slip no app
    /// should show: it reads as zero.
    static func counts(_ rows: [SharedRow]) throws -> InboxCounts {
        var counts = InboxCounts()
        for row in rows {
            let tally = InboxCounts.Tally(
                unseen: Self.count(try row.integer("unseen")), unread: Self.count(try row.integer("unread")),
                archived: Self.count(try row.integer("archived")))
            guard !tally.isZero else { continue }
            let type = try row.text("type")
            counts.byType[type] = tally
            counts.total.unseen += tally.unseen
            counts.total.unread += tally.unread
            counts.total.archived += tally.archived
        }
        return counts
    }

    /// A stored counter as a count: never below zero, never past what an `Int` holds.
    static func count(_ stored: Int64) -> Int {
        Int(clamping: max(0, min(stored, Int64(Int32.max))))
    }

    public func badges(for userIDs: Set<String>) async throws -> [String: Int] {
        var badges: [String: Int] = [:]
        for chunk in Array(userIDs).chunked(Self.badgeChunk) {
            let list = chunk.indices.map { "$\($0 + 1)" }.joined(separator: ", ")
            let rows = try await database.rows(
                SharedStatement(
                    "SELECT user_id, CAST(SUM(unread) AS BIGINT) AS unread FROM inbox_counts WHERE user_id IN (\(list)) GROUP BY user_id",
                    values: chunk.map { .text($0) }))
            for row in rows { badges[try row.text("user_id")] = Self.count(try row.integer("unread")) }
        }
        // A user with no counter row yet has nothing unread.
        for user in userIDs where badges[user] == nil { badges[user] = 0 }
        return badges
    }

    public func items(userID: String, state: InboxState?, type: String?, limit: Int, before: String?) async throws -> HistoryPage {
        var values: [SharedStatement.Value] = [.text(userID), .integer(try StoredRecords.sequence(before: before))]
        var conditions = ["h.user_id = $1", "h.seq < $2"]
        if let state, let condition = Self.condition(state) { conditions.append(condition) }
        if let type {
            values.append(.text(type))
            conditions.append("h.type = $\(values.count)")
        }
        values.append(.integer(Int64(limit) + 1))
        // A page, like the unfiltered one, may come from a read replica; counts never do.
        let rows = try await database.rowsThatMayLag(
            SharedStatement(
                """
                SELECT \(StoredRecords.historyColumns)
                FROM history h JOIN notifications n ON n.id = h.notification_id
                WHERE \(conditions.joined(separator: " AND "))
                ORDER BY h.seq DESC LIMIT $\(values.count)
                """, values: values))
        return HistoryPage(items: try rows.prefix(limit).map(StoredRecords.historyItem), next: try StoredRecords.nextCursor(rows, limit: limit))
    }

    /// The rows in `state`, written so each engine can use the partial index the state has.
    static func condition(_ state: InboxState) -> String? {
        let inInbox = "h.archived = 0 AND h.snoozed_until IS NULL"
        return switch state {
        case .all: nil
        case .inbox: inInbox
        case .unseen: "h.read = 0 AND h.seen = 0 AND \(inInbox)"
        case .seen: "h.seen = 1 AND \(inInbox)"
        case .unread: "h.read = 0 AND \(inInbox)"
        case .read: "h.read = 1 AND \(inInbox)"
        case .archived: "h.archived = 1"
        case .snoozed: "h.snoozed_until IS NOT NULL"
        }
    }

    public func endSnoozes(dueBy now: Date, limit: Int) async throws -> [String] {
        let due = SharedStatement(
            """
            SELECT seq, user_id FROM history WHERE snoozed_until IS NOT NULL AND snoozed_until <= $1 ORDER BY snoozed_until LIMIT $2
            """, .integer(Timestamp.microseconds(now)), .integer(Int64(limit)))
        let rows = try await database.rows(due)
        guard !rows.isEmpty else { return [] }
        let seqs = try rows.map { SharedStatement.Value.integer(try $0.integer("seq")) }
        let owners = Array(Set(try rows.map { try $0.text("user_id") })).sorted()
        let list = seqs.indices.map { "$\($0 + 1)" }.joined(separator: ", ")
        // Still snoozed: another process may have ended these since they were read (its users
        // then hear of it twice, which costs a re-read, never a wrong count).
        let ended = try await database.transaction(
            [SharedStatement("UPDATE history SET snoozed_until = NULL WHERE seq IN (\(list)) AND snoozed_until IS NOT NULL RETURNING user_id", values: seqs)],
            announcing: .inbox(users: owners))
        return try ended.map { try $0.text("user_id") }
    }

    public func purge(archived: Bool, before: Date, limit: Int) async throws -> Int {
        let state = archived ? "archived = 1" : "read = 1"
        let rows = try await database.transaction([
            SharedStatement(
                "DELETE FROM history WHERE seq IN (SELECT seq FROM history WHERE \(state) AND created_at < $1 LIMIT $2) RETURNING 1 AS purged",
                .integer(Timestamp.microseconds(before)), .integer(Int64(limit)))
        ])
        return rows.count
    }
}
