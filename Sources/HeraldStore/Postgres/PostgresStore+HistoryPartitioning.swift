import Foundation
import HeraldCore
import PostgresNIO

extension PostgresStore {
    /// Partitions an existing database's history while Herald serves (`herald migrate
    /// --partition-history`; docs/durability.md, "History partitions on PostgreSQL"). No step
    /// holds a lock for longer than a catalog change, however many rows there are:
    /// 1. A constraint that every id lies below a bound, a month or more ahead, is added without
    ///    a scan and then validated, a scan that lets reads and writes go on.
    /// 2. An index on `seq` alone is built concurrently (the partitioned table has one).
    /// 3. One short transaction renames the table and its indexes to `history_legacy`, creates
    ///    the partitioned `history` with the same indexes, attaches the old table below the
    ///    bound (the constraint spares the scan, the indexes are taken as they are), creates the
    ///    months from the bound on, and moves the counters' triggers.
    ///
    /// Interrupted, it is run again and carries on. Until step 3, new ids must stay below the
    /// bound, so the maintenance pass warns of a conversion left half done.
    /// - Parameter progress: one line per step, for the operator.
    public func partitionHistory(now: Date = Date(), progress: @escaping @Sendable (String) -> Void) async throws {
        do {
            try await convertHistory(now: now, progress: progress)
        } catch let error as HeraldError {
            throw error
        } catch {
            throw HeraldError(
                .unavailable, code: "storage_unavailable", "could not partition history at \(address) (run it again to carry on): \(Self.describe(error))")
        }
    }

    private func convertHistory(now: Date, progress: @escaping @Sendable (String) -> Void) async throws {
        guard try await withConnection({ try await HistoryPartitions.partitions($0) }) == nil else {
            progress("history is already partitioned")
            return
        }
        let clock = ContinuousClock()
        let bound = try await legacyBound(now: now, progress: progress)
        let rows = try await withConnection { session in
            try await session.row("SELECT reltuples::bigint AS rows FROM pg_class WHERE oid = 'history'::regclass")?.integer("rows") ?? 0
        }
        // PostgreSQL's estimate: none before the table was first analyzed.
        let size = rows > 0 ? " (about \(rows) rows)" : ""
        progress("validating that history's ids\(size) lie below \(bound); reads and writes go on")
        let validating = clock.now
        try await withConnection { session in
            try await session.execute(PostgresQuery(unsafeSQL: "ALTER TABLE history VALIDATE CONSTRAINT \(HistoryPartitions.legacyBound)"))
        }
        progress("validated in \(Self.seconds(clock.now - validating))")
        try await buildSeqIndex(progress: progress)
        progress("switching to the partitioned table (one short transaction)")
        let switching = clock.now
        try await withLockRetries(progress: progress) {
            try await self.transaction { session in try await Self.switchToPartitions(below: bound, now: now, session) }
        }
        progress(
            "history is partitioned by month; the old rows are \(HistoryPartitions.legacyPartition), below \(bound) (switched in \(Self.seconds(clock.now - switching)))"
        )
    }

    /// The bound step 1 proves: one already added and still at least a day ahead, or the start
    /// of the month after the one a week from now (a month or more ahead: time for the scan).
    private func legacyBound(now: Date, progress: @Sendable (String) -> Void) async throws -> String {
        let existing = try await legacyBoundDefinition()
        let earliest = Self.micros(now.addingTimeInterval(86_400)) / 1_000_000
        if let existing, let kept = HistoryPartitions.bound(inCheck: existing), kept.second > earliest {
            progress("carrying on: history's ids are bounded below \(kept.hex) already")
            return kept.hex
        }
        let bound = HistoryPartitions.monthBound(now.addingTimeInterval(7 * 86_400), offset: 1).bound
        try await withLockRetries(progress: progress) {
            try await self.transaction { session in
                try await session.execute("SET LOCAL lock_timeout = '1s'")
                if existing != nil {
                    try await session.execute(PostgresQuery(unsafeSQL: "ALTER TABLE history DROP CONSTRAINT \(HistoryPartitions.legacyBound)"))
                }
                try await session.execute(
                    PostgresQuery(
                        unsafeSQL: "ALTER TABLE history ADD CONSTRAINT \(HistoryPartitions.legacyBound) CHECK (notification_id < '\(bound)') NOT VALID"))
            }
        }
        progress("history's new ids are bounded below \(bound) (the first partitioned month, \(Self.date(ofBound: bound)))")
        return bound
    }

    /// The `seq` index the partitioned table will take as the old table's, built concurrently;
    /// one a past run left invalid is built again.
    private func buildSeqIndex(progress: @Sendable (String) -> Void) async throws {
        let valid = try await withConnection { session in
            try await session.row("SELECT i.indisvalid AS valid FROM pg_index i WHERE i.indexrelid = to_regclass('history_by_seq')")?.first?.decode(Bool.self)
        }
        if valid == true { return }
        progress("building an index on history(seq) concurrently; reads and writes go on")
        try await withConnection { session in
            if valid == false { try await session.execute("DROP INDEX CONCURRENTLY history_by_seq") }
            try await session.execute("CREATE INDEX CONCURRENTLY history_by_seq ON history (seq)")
        }
    }

    /// Step 3, in the caller's transaction.
    private static func switchToPartitions(below bound: String, now: Date, _ session: PostgresSession) async throws {
        try await session.execute("SET LOCAL lock_timeout = '1s'")
        // The migrations' lock first: a Herald starting meanwhile migrates before or after the
        // switch, never during it.
        try await session.execute("SELECT pg_advisory_xact_lock(\(PostgresSchema.migrationLock))")
        try await session.execute("LOCK TABLE history IN ACCESS EXCLUSIVE MODE")
        guard try await HistoryPartitions.partitions(session) == nil else { return }
        let next = try await session.row("SELECT COALESCE(max(seq), 0) + 1 AS next FROM history")?.integer("next") ?? 1
        let legacy = HistoryPartitions.legacyPartition
        var statements = ["ALTER TABLE history RENAME TO \(legacy)"]
        for index in HistoryPartitions.indexes.map(\.name) + ["history_pkey", "history_notification_id_user_id_key"] {
            statements.append("ALTER INDEX \(index) RENAME TO \(legacy)\(index.dropFirst("history".count))")
        }
        statements += ["inbox_counts_inserted", "inbox_counts_deleted", "inbox_counts_changed"].map { "DROP TRIGGER \($0) ON \(legacy)" }
        statements.append("ALTER TABLE \(legacy) ALTER COLUMN seq DROP IDENTITY")
        statements += HistoryPartitions.partitionedTable(identityStart: next)
        statements.append("ALTER TABLE history ATTACH PARTITION \(legacy) FOR VALUES FROM (MINVALUE) TO ('\(bound)')")
        statements.append("ALTER TABLE \(legacy) DROP CONSTRAINT \(HistoryPartitions.legacyBound)")
        for statement in statements { try await session.execute(PostgresQuery(unsafeSQL: statement)) }
        let through = date(ofBound: HistoryPartitions.monthBound(now, offset: HistoryPartitions.monthsAhead).bound)
        try await HistoryPartitions.create(from: date(ofBound: bound), through: max(through, date(ofBound: bound)), session)
    }

    /// Runs `step` again while it fails for a lock it waited too long for (a long query held the
    /// table), up to a minute; each wait is short, so accepts do not queue behind it.
    private func withLockRetries(progress: @Sendable (String) -> Void, _ step: () async throws -> Void) async throws {
        for attempt in 1...60 {
            do {
                return try await step()
            } catch let error where PostgresPool.sqlState(error) == "55P03" && attempt < 60 {
                if attempt == 1 { progress("waiting for history's lock (a long query or a migration holds it); trying each second") }
                try await Task.sleep(for: .seconds(1))
            }
        }
    }

    private static func seconds(_ duration: Duration) -> String {
        String(format: "%.1f s", Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }
}
