import Foundation
import HeraldCore
import Logging
import PostgresNIO
import Synchronization

/// History on PostgreSQL is partitioned by the month of its notification's id (ids begin with
/// their second, so a range of ids is a range of time, and the unique notification-and-user
/// pair holds the partition key). Retention then drops a month whose rows have all expired,
/// where a `DELETE` would rewrite every row and leave the table to bloat (docs/durability.md,
/// "History partitions on PostgreSQL").
///
/// - A new database's history is partitioned by migration v22. An existing one's is left as it
///   is, and ``PostgresStore/partitionHistory(progress:)`` converts it while Herald serves.
/// - The month partitions are created ahead (this month and the next two) at migration and at
///   every maintenance pass. A row no month takes (an id from a clock far off) lands in
///   `history_default`, which batched deletes purge like an unpartitioned table.
package enum HistoryPartitions {
    /// Months created ahead of the current one.
    static let monthsAhead = 2
    static let defaultPartition = "history_default"
    /// The unpartitioned table, once it is a partition of the partitioned one.
    static let legacyPartition = "history_legacy"
    /// The constraint that proves the legacy table's ids lie below the first month's.
    static let legacyBound = "history_legacy_bound"

    /// History's columns as v21 left them, and its key; `identityStart` continues a legacy
    /// table's sequence.
    static func parent(identityStart: Int64 = 1) -> String {
        """
        CREATE TABLE history (
            seq BIGINT GENERATED ALWAYS AS IDENTITY (START WITH \(identityStart)),
            notification_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            read BIGINT NOT NULL DEFAULT 0,
            created_at BIGINT NOT NULL,
            seen BIGINT NOT NULL DEFAULT 0,
            archived BIGINT NOT NULL DEFAULT 0,
            snoozed_until BIGINT,
            type TEXT NOT NULL DEFAULT '',
            UNIQUE (notification_id, user_id)
        ) PARTITION BY RANGE (notification_id)
        """
    }

    /// The unpartitioned table's indexes by name (the unique pair is the key's), plus one on
    /// `seq` alone, which the key was: purges and snooze wakes find rows by it.
    static let indexes: [(name: String, definition: String)] = [
        ("history_by_user", "(user_id, seq)"),
        ("history_by_age", "(created_at)"),
        ("history_unread", "(user_id, seq) WHERE read = 0"),
        ("history_archived", "(user_id, seq) WHERE archived = 1"),
        ("history_snoozed", "(snoozed_until) WHERE snoozed_until IS NOT NULL"),
        ("history_read_by_age", "(created_at) WHERE read = 1"),
        ("history_archived_by_age", "(created_at) WHERE archived = 1"),
        ("history_by_seq", "(seq)"),
    ]

    /// The partitioned table with its indexes, default partition and counters' triggers.
    static func partitionedTable(identityStart: Int64 = 1) -> [String] {
        [parent(identityStart: identityStart)] + indexes.map { "CREATE INDEX \($0.name) ON history \($0.definition)" }
            + ["CREATE TABLE \(defaultPartition) PARTITION OF history DEFAULT"] + InboxSQL.postgresTriggerStatements
    }

    /// Migration v22: an empty, unpartitioned history (a new database's) becomes partitioned;
    /// one with rows is left for ``PostgresStore/partitionHistory(progress:)``, which does not
    /// stop Herald for the length of a copy.
    static let migration: [String] = [
        """
        DO $migration$ BEGIN
            IF (SELECT relkind FROM pg_class WHERE oid = 'history'::regclass) = 'r' AND NOT EXISTS (SELECT 1 FROM history) THEN
                DROP TABLE history;
                \(partitionedTable().joined(separator: ";\n"));
            END IF;
        END $migration$
        """
    ]

    // MARK: Months

    /// The first id of the UTC month `offset` months from the one holding `date`: its second
    /// in 8 lowercase hex digits, as ids begin. Clamped to what 32 bits of seconds hold.
    static func monthBound(_ date: Date, offset: Int = 0) -> (name: String, bound: String) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? .current
        let components = calendar.dateComponents([.year, .month], from: date)
        let start = calendar.date(from: components).flatMap { calendar.date(byAdding: .month, value: offset, to: $0) } ?? date
        let seconds = UInt32(clamping: Int64(saturating: start.timeIntervalSince1970.rounded(.down)))
        let month = calendar.dateComponents([.year, .month], from: start)
        let name = String(format: "history_y%04dm%02d", month.year ?? 1970, month.month ?? 1)
        return (name, String(format: "%08x", seconds))
    }

    /// The bound in the legacy table's check as PostgreSQL writes it (`CHECK ((notification_id <
    /// '6b36ec80'::text))`), with its second.
    static func bound(inCheck definition: String) -> (hex: String, second: Int64)? {
        guard let match = definition.firstMatch(of: /'([0-9a-f]{8})'/), let second = second(ofBound: String(match.1)) else { return nil }
        return (String(match.1), second)
    }

    /// The second an id bound stands for (its first 8 hex digits).
    static func second(ofBound bound: String) -> Int64? {
        Int64(bound.prefix(8), radix: 16)
    }

    /// One partition of history and its bounds (nil: MINVALUE).
    struct Partition: Equatable {
        var name: String
        var lower: String?
        var upper: String?
        var isDefault = false

        /// Reads `FOR VALUES FROM ('…') TO ('…')`, `MINVALUE` and `DEFAULT` as PostgreSQL writes them.
        init(name: String, bound: String) {
            self.name = name
            let values = bound.matches(of: /\((MINVALUE|MAXVALUE|'([0-9a-f]*)')\)/).map { $0.output.2.map(String.init) }
            isDefault = values.count != 2
            lower = isDefault ? nil : values[0]
            upper = isDefault ? nil : values[1]
        }

        init(name: String, lower: String?, upper: String?) {
            self.name = name
            self.lower = lower
            self.upper = upper
        }

        func overlaps(_ lowerBound: String, _ upperBound: String) -> Bool {
            guard !isDefault else { return false }
            return (lower.map { $0 < upperBound } ?? true) && (upper.map { $0 > lowerBound } ?? true)
        }
    }

    /// Whether history is partitioned, and its partitions.
    static func partitions(_ session: PostgresSession) async throws -> [Partition]? {
        guard try await session.row("SELECT 1 FROM pg_partitioned_table WHERE partrelid = 'history'::regclass") != nil else { return nil }
        return try await session.rows(
            """
            SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
            FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'history'::regclass
            """
        ).map { Partition(name: try $0.text("name"), bound: try $0.text("bound")) }
    }

    /// Creates the month partitions from `from`'s month to `through`'s that no partition covers
    /// yet. - Returns: the names created; nil when history is not partitioned.
    @discardableResult
    static func create(from: Date, through: Date, _ session: PostgresSession) async throws -> [String]? {
        // One process at a time, and never during a migration: the migrations' lock, waited for
        // briefly (the next pass tries again), then what exists is read under it.
        try await session.execute("SET LOCAL lock_timeout = '500ms'")
        try await session.execute("SELECT pg_advisory_xact_lock(\(PostgresSchema.migrationLock))")
        guard var existing = try await partitions(session) else { return nil }
        var created: [String] = []
        var offset = 0
        while true {
            let month = monthBound(from, offset: offset)
            let next = monthBound(from, offset: offset + 1)
            guard month.bound <= monthBound(through).bound, offset < 1200 else { break }
            offset += 1
            guard !existing.contains(where: { $0.overlaps(month.bound, next.bound) }) else { continue }
            // The parent's lock is waited for briefly too: creating takes it, and accepts queued
            // behind a long wait would stall.
            try await session.execute(
                PostgresQuery(unsafeSQL: "CREATE TABLE \(month.name) PARTITION OF history FOR VALUES FROM ('\(month.bound)') TO ('\(next.bound)')"))
            existing.append(Partition(name: month.name, lower: month.bound, upper: next.bound))
            created.append(month.name)
        }
        return created
    }
}

extension PostgresStore {
    /// Creates history's partitions for this month and the next ``HistoryPartitions/monthsAhead``
    /// that do not exist yet; nothing when history is not partitioned.
    public func prepareAhead(now: Date) async throws {
        let through = Self.date(ofBound: HistoryPartitions.monthBound(now, offset: HistoryPartitions.monthsAhead).bound)
        guard let created = try await transaction({ session in try await HistoryPartitions.create(from: now, through: through, session) }) else {
            try await warnOfHalfDoneConversion(now: now)
            return
        }
        if !created.isEmpty { logger.info("created history partitions \(created.joined(separator: ", "))") }
    }

    /// An unpartitioned history that `herald migrate --partition-history` bounded and did not
    /// switch refuses ids from its bound on: said at every pass from a fortnight before.
    private func warnOfHalfDoneConversion(now: Date) async throws {
        guard let definition = try await legacyBoundDefinition(), let bound = HistoryPartitions.bound(inCheck: definition),
            TimeInterval(bound.second) - now.timeIntervalSince1970 < 14 * 86_400
        else { return }
        logger.warning(
            "history's conversion to partitions was left before its switch: from \(Self.date(ofBound: bound.hex)) on, history rows are refused; run `herald migrate --partition-history` again"
        )
    }

    /// The check `herald migrate --partition-history` adds first, as PostgreSQL writes it.
    func legacyBoundDefinition() async throws -> String? {
        try await withConnection { session in
            try await session.row(
                PostgresQuery(
                    unsafeSQL:
                        "SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint WHERE conrelid = 'history'::regclass AND conname = '\(HistoryPartitions.legacyBound)'"
                ))?.text("definition")
        }
    }

    /// Creates history's months from `from`'s through `through`'s that no partition covers (a
    /// seed's or an import's past rows). - Returns: the names created.
    package func createHistoryPartitions(from: Date, through: Date) async throws -> [String] {
        try await transaction { session in try await HistoryPartitions.create(from: from, through: through, session) } ?? []
    }

    static func date(ofBound bound: String) -> Date {
        Date(timeIntervalSince1970: TimeInterval(HistoryPartitions.second(ofBound: bound) ?? 0))
    }

    /// Drops each history partition whose ids all lie before `before` and whose rows were all
    /// written before it, taking its rows out of the inbox counters in the same transaction.
    /// - Returns: the rows dropped.
    func dropExpiredHistoryPartitions(before: Date) async throws -> Int {
        // A month that was busy is tried again some seconds later, not at every batch meanwhile.
        if let resume = historyDropsResume.withLock({ $0 }), ContinuousClock.now < resume { return 0 }
        let cutoff = Self.micros(before)
        let expired = try await withConnection { session in
            (try await HistoryPartitions.partitions(session) ?? []).filter { partition in
                guard !partition.isDefault, let upper = partition.upper, let second = HistoryPartitions.second(ofBound: upper) else { return false }
                return second * 1_000_000 <= cutoff
            }
        }
        var dropped = 0
        for partition in expired.sorted(by: { ($0.upper ?? "") < ($1.upper ?? "") }) {
            do {
                let started = ContinuousClock.now
                // nil: kept, a row in it is newer than the cutoff.
                guard let rows = try await transaction({ session in try await Self.drop(partition.name, ifAllBefore: cutoff, session) }) else { continue }
                logger.info("dropped history partition \(partition.name): \(rows) rows past retention, in \(ContinuousClock.now - started)")
                dropped += rows
            } catch let error where PostgresPool.sqlState(error) == "55P03" {
                // lock_timeout: readers or writers held the table; the next pass tries again.
                logger.notice("history partition \(partition.name) was busy; trying it again in 10 s")
                historyDropsResume.withLock { $0 = .now + .seconds(10) }
                break
            }
        }
        return dropped
    }

    /// In one transaction: the partition is locked against writes (reads go on), its rows are
    /// taken out of the counters, and it is dropped. A partition that still holds a row written
    /// at or after `cutoff` (a scheduled send's, whose id is from its accept) is kept for the
    /// batched delete. - Returns: the rows dropped; nil when it was kept.
    private static func drop(_ name: String, ifAllBefore cutoff: Int64, _ session: PostgresSession) async throws -> Int? {
        // A month kept for a newer row is told apart by its index before anything is locked or counted.
        let newestQuery = PostgresQuery(unsafeSQL: "SELECT max(created_at) AS newest FROM \(name)")
        if let seen = try await session.row(newestQuery), let newest = try seen.optionalInteger("newest"), newest >= cutoff { return nil }
        try await session.execute("SET LOCAL lock_timeout = '1s'")
        try await session.execute(PostgresQuery(unsafeSQL: "LOCK TABLE \(name) IN EXCLUSIVE MODE"))
        guard let row = try await session.row(PostgresQuery(unsafeSQL: "SELECT count(*) AS rows, max(created_at) AS newest FROM \(name)")) else { return nil }
        if let newest = try row.optionalInteger("newest"), newest >= cutoff { return nil }
        try await session.execute(PostgresQuery(unsafeSQL: InboxSQL.postgresUncount(rowsOf: name)))
        // Dropping takes the parent's lock; waiting long for it would queue every accept behind.
        try await session.execute("SET LOCAL lock_timeout = '200ms'")
        try await session.execute(PostgresQuery(unsafeSQL: "DROP TABLE \(name)"))
        return Int(try row.integer("rows"))
    }
}
