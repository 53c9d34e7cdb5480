import Foundation
import HeraldCore
import PostgresNIO

extension PostgresStore {
    /// Partitions an existing database's table while Herald serves (`herald migrate
    /// --partition-history`, `--partition-deliveries`; docs/durability.md, "Month partitions on
    /// PostgreSQL"). No step holds a lock for longer than a catalog change, however many rows
    /// there are:
    /// 1. A constraint that every key lies below a bound, a month or more ahead, is added
    ///    without a scan and then validated, a scan that lets reads and writes go on.
    /// 2. The indexes the partitioned table has and the old one lacks (history's on `seq`
    ///    alone) are built concurrently.
    /// 3. One short transaction renames the table and its indexes to `<table>_legacy`, creates
    ///    the partitioned table with the same indexes, attaches the old table below the bound
    ///    (the constraint spares the scan, the indexes are taken as they are), creates the
    ///    months from the bound on, and moves the triggers.
    ///
    /// Interrupted, it is run again and carries on. Until step 3, new keys must stay below the
    /// bound, so the maintenance pass warns of a conversion left half done.
    /// - Parameter progress: one line per step, for the operator.
    package func partition(_ table: MonthPartitionedTable, now: Date = Date(), progress: @escaping @Sendable (String) -> Void) async throws {
        defer { forgetPartitions(of: table) }
        do {
            try await convert(table, now: now, progress: progress)
        } catch let error as HeraldError {
            throw error
        } catch {
            throw HeraldError(
                .unavailable, code: "storage_unavailable",
                "could not partition \(table.table) at \(address) (run it again to carry on): \(Self.describe(error))")
        }
    }

    /// The schema of a Herald from before partitions (history, deliveries and events one table
    /// each), for rehearsing and testing their conversion; with the sequence this build's
    /// accepts draw delivery ids from (an older Herald's did not need it; migration v23 keeps it).
    package func migrateAsBeforePartitions() async throws {
        try await migrate(stoppingBefore: "v22-history-partitions")
        try await withConnection { try await $0.execute(PostgresQuery(unsafeSQL: "CREATE SEQUENCE IF NOT EXISTS \(DeliveryIDs.sequence)")) }
    }

    private func convert(_ table: MonthPartitionedTable, now: Date, progress: @escaping @Sendable (String) -> Void) async throws {
        guard try await withConnection({ try await table.partitions($0) }) == nil else {
            progress("\(table.table) is already partitioned")
            return
        }
        let clock = ContinuousClock()
        let bound = try await legacyBound(table, now: now, progress: progress)
        let rows = try await withConnection { session in
            try await session.row(PostgresQuery(unsafeSQL: "SELECT reltuples::bigint AS rows FROM pg_class WHERE oid = '\(table.table)'::regclass"))?
                .integer("rows") ?? 0
        }
        // PostgreSQL's estimate: none before the table was first analyzed.
        let size = rows > 0 ? " (about \(rows) rows)" : ""
        progress("validating that the keys of \(table.table)\(size) lie below \(table.literal(bound)); reads and writes go on")
        let validating = clock.now
        try await withConnection { session in
            try await session.execute(PostgresQuery(unsafeSQL: "ALTER TABLE \(table.table) VALIDATE CONSTRAINT \(table.legacyBound)"))
        }
        progress("validated in \(Self.seconds(clock.now - validating))")
        try await buildMissingIndexes(table, progress: progress)
        progress("switching to the partitioned table (one short transaction)")
        let switching = clock.now
        try await withLockRetries(table, progress: progress) {
            try await self.transaction { session in try await Self.switchToPartitions(table, below: bound, now: now, session) }
        }
        progress(
            "\(table.table) is partitioned by month; the old rows are \(table.legacyPartition), below \(table.literal(bound)) (switched in \(Self.seconds(clock.now - switching)))"
        )
    }

    /// The bound step 1 proves, as a second: one already added and still at least a day ahead,
    /// or the start of the month after the one a week from now (a month or more: time for the scan).
    private func legacyBound(_ table: MonthPartitionedTable, now: Date, progress: @Sendable (String) -> Void) async throws -> Int64 {
        let existing = try await legacyBoundDefinition(table)
        let earliest = Self.micros(now.addingTimeInterval(86_400)) / 1_000_000
        if let existing, let kept = table.second(inCheck: existing), kept > earliest {
            progress("carrying on: the keys of \(table.table) are bounded below \(table.literal(kept)) already")
            return kept
        }
        let bound = table.month(now.addingTimeInterval(7 * 86_400), offset: 1).second
        try await withLockRetries(table, progress: progress) {
            try await self.transaction { session in
                try await session.execute("SET LOCAL lock_timeout = '1s'")
                if existing != nil {
                    try await session.execute(PostgresQuery(unsafeSQL: "ALTER TABLE \(table.table) DROP CONSTRAINT \(table.legacyBound)"))
                }
                try await session.execute(
                    PostgresQuery(
                        unsafeSQL:
                            "ALTER TABLE \(table.table) ADD CONSTRAINT \(table.legacyBound) CHECK (\(table.key) < \(table.literal(bound))) NOT VALID"))
            }
        }
        progress(
            "new keys of \(table.table) are bounded below \(table.literal(bound)) (the first partitioned month, \(Date(timeIntervalSince1970: TimeInterval(bound))))"
        )
        return bound
    }

    /// The indexes the partitioned table will take as the old table's, built concurrently where
    /// the old table lacks them; one a past run left invalid is built again.
    private func buildMissingIndexes(_ table: MonthPartitionedTable, progress: @Sendable (String) -> Void) async throws {
        for index in table.indexes {
            let valid = try await withConnection { session in
                try await session.row(
                    PostgresQuery(unsafeSQL: "SELECT i.indisvalid AS valid FROM pg_index i WHERE i.indexrelid = to_regclass('\(index.name)')")
                )?.first?.decode(Bool.self)
            }
            if valid == true { continue }
            progress("building an index on \(table.table) \(index.definition) concurrently; reads and writes go on")
            try await withConnection { session in
                if valid == false { try await session.execute(PostgresQuery(unsafeSQL: "DROP INDEX CONCURRENTLY \(index.name)")) }
                try await session.execute(PostgresQuery(unsafeSQL: "CREATE INDEX CONCURRENTLY \(index.name) ON \(table.table) \(index.definition)"))
            }
        }
    }

    /// Step 3, in the caller's transaction.
    private static func switchToPartitions(_ table: MonthPartitionedTable, below bound: Int64, now: Date, _ session: PostgresSession) async throws {
        try await session.execute("SET LOCAL lock_timeout = '1s'")
        // The migrations' lock first: a Herald starting meanwhile migrates before or after the
        // switch, never during it.
        try await session.execute("SELECT pg_advisory_xact_lock(\(PostgresSchema.migrationLock))")
        try await session.execute(PostgresQuery(unsafeSQL: "LOCK TABLE \(table.table) IN ACCESS EXCLUSIVE MODE"))
        guard try await table.partitions(session) == nil else { return }
        let legacy = table.legacyPartition
        var statements = ["ALTER TABLE \(table.table) RENAME TO \(legacy)"]
        for index in table.indexes.map(\.name) + table.constraintIndexes {
            statements.append("ALTER INDEX \(index) RENAME TO \(legacy)\(index.dropFirst(table.table.count))")
        }
        statements += table.legacyTriggers.map { "DROP TRIGGER \($0) ON \(legacy)" }
        var identityStart: Int64 = 1
        if let identity = table.identity {
            identityStart =
                try await session.row(PostgresQuery(unsafeSQL: "SELECT COALESCE(max(\(identity)), 0) + 1 AS next FROM \(table.table)"))?
                .integer("next") ?? 1
            statements.append("ALTER TABLE \(legacy) ALTER COLUMN \(identity) DROP IDENTITY")
        }
        statements += table.partitionedTable(identityStart: identityStart)
        statements.append("ALTER TABLE \(table.table) ATTACH PARTITION \(legacy) FOR VALUES FROM (MINVALUE) TO (\(table.literal(bound)))")
        statements.append("ALTER TABLE \(legacy) DROP CONSTRAINT \(table.legacyBound)")
        for statement in statements { try await session.execute(PostgresQuery(unsafeSQL: statement)) }
        let start = Date(timeIntervalSince1970: TimeInterval(bound))
        let through = MonthPartitionedTable.monthStart(now, offset: MonthPartitionedTable.monthsAhead)
        try await table.create(from: start, through: max(through, start), session)
    }

    /// Runs `step` again while it fails for a lock it waited too long for (a long query held the
    /// table), up to a minute; each wait is short, so writes do not queue behind it.
    private func withLockRetries(_ table: MonthPartitionedTable, progress: @Sendable (String) -> Void, _ step: () async throws -> Void) async throws {
        for attempt in 1...60 {
            do {
                return try await step()
            } catch let error where PostgresPool.sqlState(error) == "55P03" && attempt < 60 {
                if attempt == 1 { progress("waiting for the lock on \(table.table) (a long query or a migration holds it); trying each second") }
                try await Task.sleep(for: .seconds(1))
            }
        }
    }

    private static func seconds(_ duration: Duration) -> String {
        String(format: "%.1f s", Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }
}
