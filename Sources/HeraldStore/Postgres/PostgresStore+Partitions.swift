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
            let created = try await transaction({ session in try await table.create(from: now, through: through, session) })
            forgetPartitions(of: table)
            guard let created else {
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
        defer { forgetPartitions(of: table) }
        return try await transaction { session in try await table.create(from: from, through: through, session) } ?? []
    }

    /// A table's months as read from the catalog at most a minute ago (nil: not partitioned).
    /// Retention looks for expired months at every batch, and a month expires once a month;
    /// this process's creations and drops are seen at once, another process's within the minute.
    func recentPartitions(of table: MonthPartitionedTable) async throws -> [MonthPartitionedTable.Partition]? {
        let now = ContinuousClock.now
        if let recent = partitionLists.withLock({ $0[table.table] }), now - recent.read < .seconds(60) { return recent.partitions }
        let partitions = try await withConnection { session in try await table.partitions(session) }
        partitionLists.withLock { $0[table.table] = (now, partitions) }
        return partitions
    }

    /// The next look at the table's months reads the catalog (``recentPartitions(of:)``).
    func forgetPartitions(of table: MonthPartitionedTable) {
        partitionLists.withLock { $0[table.table] = nil }
    }

    /// Drops each of a table's partitions whose keys all lie before `before` and whose rows
    /// its ``MonthPartitionedTable/DropRule`` lets go, its counted rows deleted first.
    /// - Returns: the rows dropped or deleted.
    package func dropExpiredPartitions(of table: MonthPartitionedTable, before: Date) async throws -> Int {
        // A month that was busy, or kept, is looked at again some time later, not at every batch.
        let now = ContinuousClock.now
        let waiting = partitionDropsResume.withLock { $0 }
        let cutoff = Self.micros(before)
        let expired = (try await recentPartitions(of: table) ?? []).filter { partition in
            guard !partition.isDefault, let upper = partition.upper, waiting[partition.name].map({ now >= $0 }) ?? true else { return false }
            return upper * 1_000_000 <= cutoff
        }
        var dropped = 0
        for partition in expired.sorted(by: { ($0.upper ?? 0) < ($1.upper ?? 0) }) {
            do {
                let started = ContinuousClock.now
                let kept = try await withConnection { session in try await Self.isKept(partition.name, by: table.dropRule, cutoff: cutoff, session) }
                let deleted = kept ? 0 : try await deleteCountedRows(of: partition, in: table, before: cutoff)
                dropped += deleted
                guard !kept, let rows = try await transaction({ session in try await Self.drop(partition, of: table, ifAllBefore: cutoff, session) }) else {
                    // Kept for a newer row or one retention must keep; age alone is read by an
                    // index, so only a rule's check waits.
                    if table.dropRule.keptQuery != nil { partitionDropsResume.withLock { $0[partition.name] = now + .seconds(600) } }
                    continue
                }
                forgetPartitions(of: table)
                logger.info("dropped \(table.table) partition \(partition.name): \(deleted + rows) rows past retention, in \(ContinuousClock.now - started)")
                partitionDropsResume.withLock { $0[partition.name] = nil }
                dropped += rows
            } catch let error where PostgresPool.sqlState(error) == "42P01" {
                // Dropped meanwhile by another process: the list read a while ago is read again.
                forgetPartitions(of: table)
            } catch let error where PostgresPool.sqlState(error) == "55P03" {
                // lock_timeout: readers or writers held the table; the next pass tries again.
                logger.notice("\(table.table) partition \(partition.name) was busy; trying it again in 10 s")
                partitionDropsResume.withLock { $0[partition.name] = .now + .seconds(10) }
                break
            }
        }
        return dropped
    }

    /// Rows of a month deleted at a time before its drop: a few tens of milliseconds each.
    static let countedRowsBatch = 1_000

    /// Deletes a month's rows that counters count, written before `cutoff`, in batches each
    /// committed by itself, so the drop that follows has nothing to correct while it holds the
    /// table (``drop(_:of:ifAllBefore:_:)``). - Returns: the rows deleted.
    private func deleteCountedRows(of partition: MonthPartitionedTable.Partition, in table: MonthPartitionedTable, before cutoff: Int64) async throws -> Int {
        var deleted = 0
        for query in Self.countedRowsDeletes(of: partition, in: table, before: cutoff) {
            while true {
                let batch = try await purge(query)
                deleted += batch
                if batch < Self.countedRowsBatch { break }
            }
        }
        return deleted
    }

    /// One batch of ``deleteCountedRows(of:in:before:)`` for each of the rule's filters; none
    /// when nothing counts the table's rows. Each names the parent, whose statement triggers keep
    /// the counters (a partition named alone fires none), and the month's bounds, so that only
    /// the month is planned. The rows are taken in their partial index's order and looked up by
    /// their id one by one (an array, where a join could be planned as a walk of the month).
    private static func countedRowsDeletes(
        of partition: MonthPartitionedTable.Partition, in table: MonthPartitionedTable, before cutoff: Int64
    )
        -> [PostgresQuery]
    {
        guard let counted = table.dropRule.counted, let upper = partition.upper else { return [] }
        let bounds = (partition.lower.map { ["\(table.key) >= \(table.literal($0))"] } ?? []) + ["\(table.key) < \(table.literal(upper))"]
        return counted.filters.map { filter in
            PostgresQuery(
                unsafeSQL: """
                    DELETE FROM \(table.table) WHERE \(bounds.joined(separator: " AND ")) AND \(counted.rowID) = ANY(ARRAY(
                        SELECT \(counted.rowID) FROM \(partition.name) WHERE \(filter) AND \(table.dropRule.newest) < \(cutoff)
                        ORDER BY \(counted.order) LIMIT \(countedRowsBatch)
                    )) RETURNING 1
                    """)
        }
    }

    /// Whether a partition holds a row written or changed at or after `cutoff` (a scheduled
    /// send's history, whose id is from its accept) or one its rule keeps; told by indexes.
    private static func isKept(_ name: String, by rule: MonthPartitionedTable.DropRule, cutoff: Int64, _ session: PostgresSession) async throws -> Bool {
        let newestQuery = PostgresQuery(unsafeSQL: "SELECT max(\(rule.newest)) AS newest FROM \(name) \(rule.newestFilter)")
        if let seen = try await session.row(newestQuery), let newest = try seen.optionalInteger("newest"), newest >= cutoff { return true }
        guard let keptQuery = rule.keptQuery else { return false }
        let row = try await session.row(PostgresQuery(unsafeSQL: keptQuery.replacingOccurrences(of: "$partition", with: name)))
        return try row?.first?.decode(Bool.self) ?? true
    }

    /// In one transaction, drops a partition unless ``isKept(_:by:cutoff:_:)`` now says to keep
    /// it. - Returns: the rows dropped; nil when it was kept.
    ///
    /// Every statement locks the parent before its partitions: a claim or a mark, whose plan
    /// names every month, holds the parent while it waits for a month. A drop that locked the
    /// month first and then waited for the parent would wait on a claim or mark waiting on it,
    /// until its lock wait ran out, at every try. So it locks the parent, waiting at most 200 ms,
    /// checks again and drops: writes wait milliseconds. The rows are counted before, unlocked
    /// (nothing new lands in a past month but a late row, which the check under the lock finds).
    /// Counted rows were deleted before (``deleteCountedRows(of:in:before:)``); the few a mark
    /// made counted since are deleted under the lock.
    private static func drop(
        _ partition: MonthPartitionedTable.Partition, of table: MonthPartitionedTable, ifAllBefore cutoff: Int64, _ session: PostgresSession
    )
        async throws -> Int?
    {
        let rows = try await session.row(PostgresQuery(unsafeSQL: "SELECT count(*) AS rows FROM \(partition.name)"))?.integer("rows") ?? 0
        try await session.execute("SET LOCAL lock_timeout = '200ms'")
        try await session.execute(PostgresQuery(unsafeSQL: "LOCK TABLE \(table.table) IN ACCESS EXCLUSIVE MODE"))
        if try await isKept(partition.name, by: table.dropRule, cutoff: cutoff, session) { return nil }
        for countedRows in countedRowsDeletes(of: partition, in: table, before: cutoff) {
            while try await session.count(countedRows) >= countedRowsBatch {}
        }
        try await session.execute(PostgresQuery(unsafeSQL: "DROP TABLE \(partition.name)"))
        return Int(rows)
    }
}
