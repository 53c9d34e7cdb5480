import HeraldStore
import PostgresNIO

extension PostgresStore {
    /// The partitions of a table partitioned by month, by name; none when it is one table.
    package func partitionNames(of table: MonthPartitionedTable) async throws -> [String] {
        try await withConnection { try await table.partitions($0) }?.map(\.name) ?? []
    }

    /// How many rows each partition of `table` holds (partitions without rows left out).
    package func rowsByPartition(of table: MonthPartitionedTable) async throws -> [String: Int] {
        let rows = try await withConnection { session in
            try await session.rows(PostgresQuery(unsafeSQL: "SELECT tableoid::regclass::text AS part, count(*) AS rows FROM \(table.table) GROUP BY 1"))
                .map { (try $0.text("part"), Int(try $0.integer("rows"))) }
        }
        return Dictionary(uniqueKeysWithValues: rows)
    }
}
