import Foundation
import HeraldCore
import Logging
import PostgresNIO
import Synchronization

extension PostgresStore {
    /// The tables partitioned by month (docs/durability.md, "Month partitions on PostgreSQL").
    package static let partitionedTables: [MonthPartitionedTable] = [.history, .deliveries, .events]

    /// Creates each partitioned table's months, this one and the next
    /// ``MonthPartitionedTable/monthsAhead``, that do not exist yet; for a table not yet
    /// partitioned, warns of a conversion left before its switch.
    public func prepareAhead(now: Date) async throws {
        for table in Self.partitionedTables {
            let through = MonthPartitionedTable.monthStart(now, offset: MonthPartitionedTable.monthsAhead)
            guard let created = try await transaction({ session in try await table.create(from: now, through: through, session) }) else {
                try await warnOfHalfDoneConversion(table, now: now)
                continue
            }
            if !created.isEmpty { logger.info("created \(table.table) partitions \(created.joined(separator: ", "))") }
        }
    }

    /// An unpartitioned table that `herald migrate --partition-…` bounded and did not switch
    /// refuses keys from its bound on: said at every pass from a fortnight before.
    private func warnOfHalfDoneConversion(_ table: MonthPartitionedTable, now: Date) async throws {
        guard let definition = try await legacyBoundDefinition(table), let second = table.second(inCheck: definition),
            TimeInterval(second) - now.timeIntervalSince1970 < 14 * 86_400
        else { return }
        logger.warning(
            "the conversion of \(table.table) to partitions was left before its switch: from \(Date(timeIntervalSince1970: TimeInterval(second))) on, its rows are refused; run `herald migrate --partition-\(table.table)` again"
        )
    }

    /// The check `herald migrate --partition-…` adds first, as PostgreSQL writes it.
    func legacyBoundDefinition(_ table: MonthPartitionedTable) async throws -> String? {
        try await withConnection { session in
            try await session.row(
                PostgresQuery(
                    unsafeSQL:
                        "SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint WHERE conrelid = '\(table.table)'::regclass AND conname = '\(table.legacyBound)'"
                ))?.text("definition")
        }
    }

    /// Creates a table's months from `from`'s through `through`'s that no partition covers (a
    /// seed's or an import's past rows). - Returns: the names created.
    package func createPartitions(of table: MonthPartitionedTable, from: Date, through: Date) async throws -> [String] {
        try await transaction { session in try await table.create(from: from, through: through, session) } ?? []
    }

    /// Drops each of a table's partitions whose keys all lie before `before` and whose rows
    /// its ``MonthPartitionedTable/DropRule`` lets go, running its `beforeDrop` statements in
    /// the same transaction. - Returns: the rows dropped.
    package func dropExpiredPartitions(of table: MonthPartitionedTable, before: Date) async throws -> Int {
        // A month that was busy, or kept, is looked at again some time later, not at every batch.
        let now = ContinuousClock.now
        let waiting = partitionDropsResume.withLock { $0 }
        let cutoff = Self.micros(before)
        let expired = try await withConnection { session in
            (try await table.partitions(session) ?? []).filter { partition in
                guard !partition.isDefault, let upper = partition.upper, waiting[partition.name].map({ now >= $0 }) ?? true else { return false }
                return upper * 1_000_000 <= cutoff
            }
        }
        var dropped = 0
        for partition in expired.sorted(by: { ($0.upper ?? 0) < ($1.upper ?? 0) }) {
            do {
                let started = ContinuousClock.now
                guard let rows = try await transaction({ session in try await Self.drop(partition.name, of: table, ifAllBefore: cutoff, session) }) else {
                    // Kept for a newer row or one retention must keep; age alone is read by an
                    // index, so only a rule's check waits.
                    if table.dropRule.keptQuery != nil { partitionDropsResume.withLock { $0[partition.name] = now + .seconds(600) } }
                    continue
                }
                logger.info("dropped \(table.table) partition \(partition.name): \(rows) rows past retention, in \(ContinuousClock.now - started)")
                partitionDropsResume.withLock { $0[partition.name] = nil }
                dropped += rows
            } catch let error where PostgresPool.sqlState(error) == "55P03" {
                // lock_timeout: readers or writers held the table; the next pass tries again.
                logger.notice("\(table.table) partition \(partition.name) was busy; trying it again in 10 s")
                partitionDropsResume.withLock { $0[partition.name] = .now + .seconds(10) }
                break
            }
        }
        return dropped
    }

    /// In one transaction, keeping a partition that still holds a row written or changed at or
    /// after `cutoff` (a scheduled send's history, whose id is from its accept) or one its rule
    /// keeps, for the batched delete. - Returns: the rows dropped; nil when it was kept.
    ///
    /// Every statement locks the parent before its partitions: a claim or a mark, whose plan
    /// names every month, holds the parent while it waits for a month. So a drop that locked the
    /// month first and then waited for the parent would wait on a claim waiting on it, until its
    /// lock wait ran out, at every try. It locks in the same order as they do:
    /// - with nothing to correct (deliveries, events): the parent is locked, waiting at most
    ///   200 ms, the rule checked again through its indexes, and the month dropped, so writes
    ///   wait milliseconds; the rows were counted before, unlocked (nothing new lands in a past
    ///   month);
    /// - with counters to correct first (history): the month is locked against writes while its
    ///   rows are taken out of the counters, then the parent, as before. A mark of an inbox item
    ///   during those seconds holds the parent and waits for the month, and the drop gives way
    ///   after 200 ms to be tried again (docs/durability.md).
    private static func drop(_ name: String, of table: MonthPartitionedTable, ifAllBefore cutoff: Int64, _ session: PostgresSession) async throws -> Int? {
        let rule = table.dropRule
        func kept() async throws -> Bool {
            let newestQuery = PostgresQuery(unsafeSQL: "SELECT max(\(rule.newest)) AS newest FROM \(name) \(rule.newestFilter)")
            if let seen = try await session.row(newestQuery), let newest = try seen.optionalInteger("newest"), newest >= cutoff { return true }
            guard let keptQuery = rule.keptQuery else { return false }
            let row = try await session.row(PostgresQuery(unsafeSQL: keptQuery.replacingOccurrences(of: "$partition", with: name)))
            return try row?.first?.decode(Bool.self) ?? true
        }
        // A month kept is told apart by its indexes before anything is locked or counted.
        if try await kept() { return nil }
        let count = PostgresQuery(unsafeSQL: "SELECT count(*) AS rows FROM \(name)")
        if rule.beforeDrop.isEmpty {
            let rows = try await session.row(count)?.integer("rows") ?? 0
            try await session.execute("SET LOCAL lock_timeout = '200ms'")
            try await session.execute(PostgresQuery(unsafeSQL: "LOCK TABLE \(table.table) IN ACCESS EXCLUSIVE MODE"))
            if try await kept() { return nil }
            try await session.execute(PostgresQuery(unsafeSQL: "DROP TABLE \(name)"))
            return Int(rows)
        }
        try await session.execute("SET LOCAL lock_timeout = '1s'")
        try await session.execute(PostgresQuery(unsafeSQL: "LOCK TABLE \(name) IN EXCLUSIVE MODE"))
        if try await kept() { return nil }
        guard let row = try await session.row(count) else { return nil }
        for statement in rule.beforeDrop {
            try await session.execute(PostgresQuery(unsafeSQL: statement.replacingOccurrences(of: "$partition", with: name)))
        }
        // Dropping takes the parent's lock; waiting long for it would queue every write behind.
        try await session.execute("SET LOCAL lock_timeout = '200ms'")
        try await session.execute(PostgresQuery(unsafeSQL: "DROP TABLE \(name)"))
        return Int(try row.integer("rows"))
    }
}
