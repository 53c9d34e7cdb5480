import Foundation
import HeraldCore
import HeraldTestSupport
import Logging
import PostgresNIO
import Synchronization
import Testing

@testable import HeraldStore

/// PostgreSQL's history partitioned by month (docs/durability.md, "Month partitions on
/// PostgreSQL"): a new database's from the start, an existing one's while writes go on;
/// retention drops whole months, their counted rows deleted through the inbox counters first.
@Suite(.cleansUp) struct HistoryPartitionTests {
    let ids = ObjectIDGenerator()
    static let history = MonthPartitionedTable.history
    static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? .current
        return calendar
    }()

    static func date(_ year: Int, _ month: Int, _ day: Int = 1) -> Date {
        utc.date(from: DateComponents(year: year, month: month, day: day)) ?? Date()
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aNewDatabasesHistoryIsPartitionedByMonthAhead() async throws {
        let store = try await Self.store()
        try await store.migrate()
        let now = Date()
        let names = try await store.partitionNames(of: .history)
        let expected = (0...MonthPartitionedTable.monthsAhead).map { Self.history.month(now, offset: $0).name }
        #expect(Set(names) == Set(expected + [Self.history.defaultPartition]), "this month, the next two and the default: \(names)")

        try await Self.insert(store, id: ids.next(at: now).hex, user: "ada", createdAt: now)
        try await Self.insert(store, id: ids.next(at: Self.date(2020, 5, 3)).hex, user: "ada", createdAt: now)
        #expect(try await store.rowsByPartition(of: .history) == [Self.history.month(now).name: 1, Self.history.defaultPartition: 1])

        // A pass later, the months ahead are there already: nothing is created twice.
        try await store.prepareAhead(now: now)
        try await store.prepareAhead(now: Self.utc.date(byAdding: .month, value: 1, to: now) ?? now)
        #expect(try await store.partitionNames(of: .history).count == names.count + 1, "one more month, at the far end")
        try await Self.expectCountersMatchARecount(store)
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func retentionDropsExpiredMonthsAndTakesThemOutOfTheCounters() async throws {
        let store = try await Self.store()
        try await store.migrate()
        let january = Self.date(2025, 1)
        let february = Self.date(2025, 2)
        let cutoff = Self.date(2025, 3)
        #expect(try await store.createPartitions(of: .history, from: january, through: february) == ["history_y2025m01", "history_y2025m02"])

        // January: unread, read and archived rows of two types, all written in January.
        for (index, user) in ["ada", "bob", "cy"].enumerated() {
            for day in 1...5 {
                try await Self.insert(
                    store, id: ids.next(at: Self.date(2025, 1, day)).hex, user: user, createdAt: Self.date(2025, 1, day), read: day % 2,
                    archived: day == 5 ? 1 : 0,
                    type: index == 0 ? "comment" : "like")
            }
        }
        // February: old rows, and one a scheduled send wrote in March with February's id.
        try await Self.insert(store, id: ids.next(at: Self.date(2025, 2, 3)).hex, user: "ada", createdAt: Self.date(2025, 2, 3))
        try await Self.insert(store, id: ids.next(at: Self.date(2025, 2, 4)).hex, user: "bob", createdAt: Self.date(2025, 2, 4))
        try await Self.insert(store, id: ids.next(at: Self.date(2025, 2, 5)).hex, user: "ada", createdAt: Self.date(2025, 3, 9))
        // The default partition: an id no month takes, written long ago.
        try await Self.insert(store, id: ids.next(at: Self.date(2020, 1, 2)).hex, user: "cy", createdAt: Self.date(2020, 1, 2))
        // This month's.
        try await Self.insert(store, id: ids.next().hex, user: "ada", createdAt: Date())
        try await Self.expectCountersMatchARecount(store)
        #expect(try await Self.unread(store, "ada") == 5, "two in January, two in February, one now")

        let removed = try await store.purgeHistory(before: cutoff, limit: 1000)
        #expect(removed == 15 + 2 + 1, "January dropped (15 rows), then February's two old rows and the default's one deleted")
        let names = try await store.partitionNames(of: .history)
        #expect(!names.contains("history_y2025m01"), "January is dropped")
        #expect(names.contains("history_y2025m02"), "February holds a row written after the cutoff, so it stays")
        #expect(try await store.rowsByPartition(of: .history) == ["history_y2025m02": 1, Self.history.month(Date()).name: 1])
        try await Self.expectCountersMatchARecount(store)
        #expect(try await Self.unread(store, "ada") == 2, "ada's unread: February's late row and this month's")
        #expect(try await Self.unread(store, "bob") == 0)
        #expect(try await store.purgeHistory(before: cutoff, limit: 1000) == 0, "nothing left past the cutoff")
    }

    /// Retention reads a table's months from the catalog at most once a minute, not at every
    /// batch; a month another process dropped meanwhile is passed over, and one that expires
    /// in this process's own list is still dropped.
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func monthsReadAWhileAgoAreDroppedOnceWhateverTheOtherProcessDid() async throws {
        let url = try await PostgresTestDatabase.create()
        let (one, other) = (try await Self.store(url), try await Self.store(url))
        try await one.migrate()
        _ = try await one.createPartitions(of: .history, from: Self.date(2025, 1), through: Self.date(2025, 2))
        for month in [1, 2] {
            try await Self.insert(store: one, month: month)
        }
        // Both processes read the months; then one drops January, and the other, working from
        // the list it read, finds it gone and goes on to February.
        #expect(try await one.purgeHistory(before: Self.date(2024, 12), limit: 1000) == 0)
        #expect(try await other.purgeHistory(before: Self.date(2024, 12), limit: 1000) == 0)
        #expect(try await one.purgeHistory(before: Self.date(2025, 2), limit: 1000) == 1, "January")
        #expect(try await other.purgeHistory(before: Self.date(2025, 3), limit: 1000) == 1, "February, January being gone")
        #expect(try await other.partitionNames(of: .history).filter { $0.hasPrefix("history_y2025") }.isEmpty)
        #expect(try await one.purgeHistory(before: Self.date(2025, 3), limit: 1000) == 0, "nothing left, and no error for the month it read")
    }

    static func insert(store: PostgresStore, month: Int) async throws {
        try await insert(store, id: ObjectIDGenerator().next(at: date(2025, month, 3)).hex, user: "ada", createdAt: date(2025, month, 3))
    }

    /// A mark of every item names no month, so its plan holds the parent while it waits for
    /// each month. A drop waiting for the parent while holding the month would wait on such a
    /// mark waiting on it, at every try (docs/durability.md).
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aDropWaitingForTheParentHoldsNothingAMarkWaitsFor() async throws {
        let url = try await PostgresTestDatabase.create()
        let store = try await Self.store(url)
        try await store.migrate()
        let january = Self.date(2025, 1)
        _ = try await store.createPartitions(of: .history, from: january, through: january)
        for day in 1...4 {
            try await Self.insert(store, id: ids.next(at: Self.date(2025, 1, day)).hex, user: "ada", createdAt: Self.date(2025, 1, day), read: day % 2)
        }
        try await Self.insert(store, id: ids.next().hex, user: "ada", createdAt: Date())

        // A mark holding the parent, as its plan does before it reaches the months.
        let mark = try await PostgresLockHolder.start(url: url, running: "LOCK TABLE ONLY history IN ROW EXCLUSIVE MODE")
        // The drop gives way after 200 ms; a store of its own for each try (a busy month waits
        // 10 s in the store that tried it), until one is seen waiting.
        var held: [String]?
        for _ in 0..<5 where held == nil {
            let purger = try await Self.store(url)
            let purged = Mutex(false)
            let purging = Task {
                defer { purged.withLock { $0 = true } }
                return try await purger.purgeHistory(before: Self.date(2025, 2), limit: 1000)
            }
            held = try await store.locksHeldWhileWaiting(on: Self.history.month(january).name, until: { purged.withLock { $0 } })
            _ = try await purging.value
        }
        await mark.rollBack()
        let modes = try #require(held, "the drop was seen waiting for the parent")
        #expect(modes.allSatisfy { $0 == "AccessShareLock" }, "while it waits, the drop holds the month no more than a reader does: \(modes)")
        // The month given way, the batched delete (which a mark does not hold up) took its rows.
        #expect(try await store.partitionNames(of: .history).contains(Self.history.month(january).name))
        #expect(try await Self.rowsBySeq(store).count == 1, "this month's row is left")
        #expect(try await Self.unread(store, "ada") == 1, "January's unread rows went out of the counters")
        try await Self.expectCountersMatchARecount(store)

        // Nothing holds the parent now: the month goes.
        #expect(try await Self.store(url).purgeHistory(before: Self.date(2025, 2), limit: 1000) == 0)
        #expect(!(try await store.partitionNames(of: .history)).contains(Self.history.month(january).name), "January dropped")
        try await Self.expectCountersMatchARecount(store)
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func anExistingHistoryIsPartitionedWhileWritesGoOn() async throws {
        let store = try await Self.store()
        try await store.migrate(stoppingBefore: "v22-history-partitions")
        // A year of rows, written before partitions existed.
        let now = Date()
        var written: [String] = []
        for day in stride(from: 360, through: 0, by: -3) {
            let at = now.addingTimeInterval(-Double(day) * 86_400)
            let id = ids.next(at: at).hex
            try await Self.insert(store, id: id, user: ["ada", "bob", "cy"][day % 3], createdAt: at, read: day % 2, archived: day % 7 == 0 ? 1 : 0)
            written.append(id)
        }
        try await store.migrate()
        #expect(try await store.partitionNames(of: .history).isEmpty, "a history with rows is left unpartitioned by the migration")
        let before = try await Self.rowsBySeq(store)

        // Accepts go on while it converts: none is refused or lost.
        let stop = Mutex(false)
        let writer = Task {
            var count = 0
            while !stop.withLock({ $0 }) {
                try await Self.insert(store, id: ids.next().hex, user: "dee", createdAt: Date())
                count += 1
            }
            return count
        }
        let steps = Mutex<[String]>([])
        try await store.partition(.history) { step in steps.withLock { $0.append(step) } }
        try await Task.sleep(for: .milliseconds(100))
        stop.withLock { $0 = true }
        let concurrent = try await writer.value
        #expect(steps.withLock { $0 }.contains { $0.hasPrefix("history is partitioned") }, "\(steps.withLock { $0 })")

        let names = try await store.partitionNames(of: .history)
        #expect(names.contains(Self.history.legacyPartition) && names.contains(Self.history.defaultPartition))
        let after = try await Self.rowsBySeq(store)
        #expect(Array(after.prefix(before.count)) == before, "every row kept its sequence number and its place")
        #expect(after.count == before.count + concurrent, "and every row written meanwhile is there too")
        #expect(after.map(\.seq) == after.map(\.seq).sorted(), "sequence numbers go on growing")
        let holding = try await store.rowsByPartition(of: .history)
        #expect(holding[Self.history.legacyPartition] == written.count + concurrent - (holding[Self.history.month(now).name] ?? 0))
        try await Self.expectCountersMatchARecount(store)

        // The old table takes ids up to its bound (a month or more ahead), then the months do;
        // it is dropped whole once all of its rows expire.
        try await Self.insert(store, id: ids.next().hex, user: "ada", createdAt: Date())
        try await Self.expectCountersMatchARecount(store)
        let again = Mutex<[String]>([])
        try await store.partition(.history) { step in again.withLock { $0.append(step) } }
        #expect(again.withLock { $0 } == ["history is already partitioned"])
        let legacyUpper = try #require(
            try await store.withConnection { try await Self.history.partitions($0) }?.first { $0.name == Self.history.legacyPartition }?.upper)
        let removed = try await store.purgeHistory(before: Date(timeIntervalSince1970: TimeInterval(legacyUpper)).addingTimeInterval(86_400), limit: 100_000)
        #expect(removed == after.count + 1, "the old table and the months below the cutoff are dropped whole")
        #expect(!(try await store.partitionNames(of: .history)).contains(Self.history.legacyPartition))
        try await Self.expectCountersMatchARecount(store)
    }

    // MARK: Helpers

    static func store(_ url: String? = nil) async throws -> PostgresStore {
        let url = if let url { url } else { try await PostgresTestDatabase.create() }
        let store = try PostgresStore(url: url, acquireTimeout: PostgresStore.patientAcquireTimeout)
        TestResources.register { await store.close() }
        return store
    }

    static func insert(
        _ store: PostgresStore, id: String, user: String, createdAt: Date, read: Int = 0, archived: Int = 0, type: String = "comment"
    ) async throws {
        let micros = PostgresStore.micros(createdAt)
        try await store.withConnection { session in
            try await session.execute(
                """
                INSERT INTO history (notification_id, user_id, read, seen, archived, created_at, type)
                VALUES (\(id), \(user), \(read), \(read), \(archived), \(micros), \(type))
                """
            )
        }
    }

    static func rowsBySeq(_ store: PostgresStore) async throws -> [StoredHistoryRow] {
        try await store.withConnection { session in
            try await session.rows("SELECT seq, notification_id, user_id FROM history ORDER BY seq").map {
                StoredHistoryRow(seq: try $0.integer("seq"), notificationID: try $0.text("notification_id"), userID: try $0.text("user_id"))
            }
        }
    }

    struct StoredHistoryRow: Equatable, Sendable {
        var seq: Int64
        var notificationID: String
        var userID: String
    }

    static func unread(_ store: PostgresStore, _ user: String) async throws -> Int64 {
        try await store.withConnection { session in
            try await session.row("SELECT COALESCE(SUM(unread), 0)::bigint AS unread FROM inbox_counts WHERE user_id = \(user)")?.integer("unread") ?? -1
        }
    }

    /// The counters, zero rows aside, are what counting the rows gives.
    static func expectCountersMatchARecount(_ store: PostgresStore, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let share = InboxSQL.shares(of: "h")
        let (kept, counted) = try await store.withConnection { session in
            let kept = try await session.rows(
                "SELECT user_id, type, unseen, unread, archived FROM inbox_counts WHERE unseen <> 0 OR unread <> 0 OR archived <> 0 ORDER BY user_id, type"
            ).map { "\(try $0.text("user_id"))/\(try $0.text("type")) \(try $0.integer("unseen")) \(try $0.integer("unread")) \(try $0.integer("archived"))" }
            let counted = try await session.rows(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT * FROM (SELECT user_id, type, SUM(\(share.unseen))::bigint AS unseen, SUM(\(share.unread))::bigint AS unread,
                            SUM(\(share.archived))::bigint AS archived FROM history h GROUP BY user_id, type) AS g
                        WHERE unseen <> 0 OR unread <> 0 OR archived <> 0 ORDER BY user_id, type
                        """)
            ).map { "\(try $0.text("user_id"))/\(try $0.text("type")) \(try $0.integer("unseen")) \(try $0.integer("unread")) \(try $0.integer("archived"))" }
            return (kept, counted)
        }
        #expect(kept == counted, "inbox counters against a recount", sourceLocation: sourceLocation)
    }
}
