import Foundation
import HeraldCore
import PostgresNIO

/// A table PostgreSQL partitions by the month of a time-ordered key, so that retention drops a
/// month whose rows have all expired where a `DELETE` would rewrite every row and leave the
/// table to bloat (docs/durability.md, "Month partitions on PostgreSQL"). History and
/// deliveries and events are three (``history``, ``deliveries``, ``events``).
///
/// - A new database's table is partitioned by its migration; an existing one's is converted by
///   ``PostgresStore/partition(_:now:progress:)`` while Herald serves.
/// - The month partitions are created ahead (this month and the next two) at migration and at
///   every maintenance pass. A row no month takes (a key from a clock far off) lands in the
///   `_default` partition, which batched deletes purge like an unpartitioned table.
package struct MonthPartitionedTable: Sendable {
    /// How a key begins with, or is made from, its second.
    enum Key: Sendable {
        /// Text ids whose first 8 lowercase hex digits are their second (notification ids).
        /// Hex ranges order the same under the C and ICU collations.
        case hexSecondPrefix
        /// Integers that are their second times 2^21 plus a sequence (delivery ids).
        case shiftedSecond
        /// Microseconds since 1970 (events' `received_at`).
        case micros
    }

    package let table: String
    /// The partition key's column.
    let key: String
    let keyKind: Key
    /// `CREATE TABLE … PARTITION BY RANGE (key)`; the argument continues a legacy table's
    /// identity where there is one.
    let parent: @Sendable (_ identityStart: Int64) -> String
    /// The indexes the table has besides its constraints' (unique ones and the key), by name.
    let indexes: [(name: String, definition: String)]
    /// Unique indexes each partition has of its own (a unique index on the parent would have to
    /// hold the key): by a suffix to the partition's name. Uniqueness across partitions is then
    /// the writer's to keep.
    let partitionIndexes: [(suffix: String, definition: String)]
    /// The indexes of its constraints, as an unpartitioned table named them.
    let constraintIndexes: [String]
    /// The identity column an unpartitioned table had, continued by the partitioned one.
    let identity: String?
    /// Statements that prepare for the partitioned table (a sequence its default draws from).
    let beforeCreate: [String]
    /// Statements that finish the partitioned table (its triggers, a sequence it owns).
    let afterCreate: [String]
    /// The triggers an unpartitioned table had, dropped from it as it becomes a partition.
    let legacyTriggers: [String]
    /// What makes a month wait when its bound has passed (``DropRule``).
    let dropRule: DropRule

    /// Whether a month whose every key lies before the cutoff may go.
    struct DropRule: Sendable {
        /// The column whose newest value must lie before the cutoff (when the row was written
        /// or last changed), and the filter its index serves.
        let newest: String
        let newestFilter: String
        /// A statement (`kept`: a boolean) saying whether the partition, `$partition`, holds a
        /// row retention must keep whatever its age; nil when age alone decides.
        let keptQuery: String?
        /// The rows counters count, when they count any: each filter a partial index's
        /// predicate, `order` its columns, `rowID` the column that names a row. Those rows are
        /// deleted before the month is dropped, through the parent, whose statement triggers take
        /// them out of the counters (dropping fires none).
        let counted: (filters: [String], order: String, rowID: String)?
    }

    /// Months created ahead of the current one.
    package static let monthsAhead = 2
    package var defaultPartition: String { "\(table)_default" }
    /// The unpartitioned table, once it is a partition of the partitioned one.
    package var legacyPartition: String { "\(table)_legacy" }
    /// The constraint that proves the legacy table's keys lie below the first month's.
    var legacyBound: String { "\(table)_legacy_bound" }

    /// The partitioned table with its indexes, default partition, ``beforeCreate`` and ``afterCreate``.
    func partitionedTable(identityStart: Int64 = 1) -> [String] {
        beforeCreate + [parent(identityStart)] + indexes.map { "CREATE INDEX \($0.name) ON \(table) \($0.definition)" }
            + ["CREATE TABLE \(defaultPartition) PARTITION OF \(table) DEFAULT"] + ownIndexes(of: defaultPartition) + afterCreate
    }

    /// ``partitionIndexes`` for one partition.
    func ownIndexes(of partition: String) -> [String] {
        partitionIndexes.map { "CREATE UNIQUE INDEX \(partition)_\($0.suffix) ON \(partition) \($0.definition)" }
    }

    /// A migration that turns an empty, unpartitioned table (a new database's) into the
    /// partitioned one and runs `otherwise` on one with rows, which is left for
    /// ``PostgresStore/partition(_:now:progress:)``: a copy would stop Herald for its length.
    func migration(otherwise: [String] = []) -> String {
        let otherwiseBlock =
            otherwise.isEmpty
            ? ""
            : "ELSIF (SELECT relkind FROM pg_class WHERE oid = '\(table)'::regclass) = 'r' THEN\n"
                + otherwise.joined(separator: ";\n") + ";"
        return """
            DO $migration$ BEGIN
                IF (SELECT relkind FROM pg_class WHERE oid = '\(table)'::regclass) = 'r' AND NOT EXISTS (SELECT 1 FROM \(table)) THEN
                    DROP TABLE \(table);
                    \(partitionedTable().joined(separator: ";\n"));
                \(otherwiseBlock)
                END IF;
            END $migration$
            """
    }

    // MARK: Months

    /// The first instant of the UTC month `offset` months from the one holding `date`.
    package static func monthStart(_ date: Date, offset: Int = 0) -> Date {
        let calendar = utc
        let components = calendar.dateComponents([.year, .month], from: date)
        return calendar.date(from: components).flatMap { calendar.date(byAdding: .month, value: offset, to: $0) } ?? date
    }

    private static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? .current
        return calendar
    }()

    /// The month `offset` months from the one holding `date` (UTC): its partition's name and
    /// its first second, clamped to what 32 bits of seconds hold.
    package func month(_ date: Date, offset: Int = 0) -> (name: String, second: Int64) {
        let start = Self.monthStart(date, offset: offset)
        let second = Int64(UInt32(clamping: Int64(saturating: start.timeIntervalSince1970.rounded(.down))))
        let month = Self.utc.dateComponents([.year, .month], from: start)
        return (table + String(format: "_y%04dm%02d", month.year ?? 1970, month.month ?? 1), second)
    }

    /// The key's SQL literal for the first key of `second`.
    func literal(_ second: Int64) -> String {
        switch keyKind {
        case .hexSecondPrefix: String(format: "'%08llx'", second)
        case .shiftedSecond: String(second << DeliveryIDs.sequenceBits)
        case .micros: String(second.multipliedReportingOverflow(by: 1_000_000).partialValue)
        }
    }

    /// The second a bound stands for, from its digits as PostgreSQL writes them in a partition's
    /// bounds or a check (`'6b36ec80'`, `'3768000000000000'`).
    func second(ofBound digits: String) -> Int64? {
        switch keyKind {
        case .hexSecondPrefix: Int64(digits.prefix(8), radix: 16)
        case .shiftedSecond: Int64(digits).map { $0 >> DeliveryIDs.sequenceBits }
        case .micros: Int64(digits).map { $0 / 1_000_000 }
        }
    }

    /// The second of the bound in the legacy table's check as PostgreSQL writes it
    /// (`CHECK ((notification_id < '6b36ec80'::text))`).
    func second(inCheck definition: String) -> Int64? {
        guard let match = definition.firstMatch(of: /'([0-9a-f]+)'/) else { return nil }
        return second(ofBound: String(match.1))
    }

    /// One partition and the seconds its bounds stand for (nil: MINVALUE).
    package struct Partition: Equatable, Sendable {
        package var name: String
        package var lower: Int64?
        package var upper: Int64?
        package var isDefault = false

        func overlaps(_ lowerBound: Int64, _ upperBound: Int64) -> Bool {
            guard !isDefault else { return false }
            return (lower.map { $0 < upperBound } ?? true) && (upper.map { $0 > lowerBound } ?? true)
        }
    }

    /// Reads `FOR VALUES FROM ('…') TO ('…')`, `MINVALUE` and `DEFAULT` as PostgreSQL writes them.
    func partition(name: String, bound: String) -> Partition {
        let values = bound.matches(of: /\((MINVALUE|MAXVALUE|'([0-9a-f]*)')\)/).map { $0.output.2.map(String.init) }
        guard values.count == 2 else { return Partition(name: name, isDefault: true) }
        return Partition(name: name, lower: values[0].flatMap(second(ofBound:)), upper: values[1].flatMap(second(ofBound:)))
    }

    /// Whether the table is partitioned, and its partitions.
    package func partitions(_ session: PostgresSession) async throws -> [Partition]? {
        let partitioned = PostgresQuery(unsafeSQL: "SELECT 1 FROM pg_partitioned_table WHERE partrelid = '\(table)'::regclass")
        guard try await session.row(partitioned) != nil else { return nil }
        return try await session.rows(
            PostgresQuery(
                unsafeSQL: """
                    SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
                    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = '\(table)'::regclass
                    """)
        ).map { partition(name: try $0.text("name"), bound: try $0.text("bound")) }
    }

    /// Creates the month partitions from `from`'s month to `through`'s that no partition covers
    /// yet. - Returns: the names created; nil when the table is not partitioned.
    @discardableResult
    func create(from: Date, through: Date, _ session: PostgresSession) async throws -> [String]? {
        // One process at a time, and never during a migration: the migrations' lock, waited for
        // briefly (the next pass tries again), then what exists is read under it.
        try await session.execute("SET LOCAL lock_timeout = '500ms'")
        try await session.execute("SELECT pg_advisory_xact_lock(\(PostgresSchema.migrationLock))")
        guard var existing = try await partitions(session) else { return nil }
        var created: [String] = []
        let last = month(through).second
        for offset in 0..<1200 {
            let month = month(from, offset: offset)
            let next = self.month(from, offset: offset + 1)
            guard month.second <= last else { break }
            guard !existing.contains(where: { $0.overlaps(month.second, next.second) }) else { continue }
            // The parent's lock is waited for briefly too: creating takes it, and writes queued
            // behind a long wait would stall.
            try await session.execute(
                PostgresQuery(
                    unsafeSQL:
                        "CREATE TABLE \(month.name) PARTITION OF \(table) FOR VALUES FROM (\(literal(month.second))) TO (\(literal(next.second)))"))
            for index in ownIndexes(of: month.name) { try await session.execute(PostgresQuery(unsafeSQL: index)) }
            existing.append(Partition(name: month.name, lower: month.second, upper: next.second))
            created.append(month.name)
        }
        return created
    }
}
