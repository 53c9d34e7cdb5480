import ArgumentParser
import Foundation
import HeraldCore
import HeraldProcessTuning
import HeraldServer
import HeraldStore
import Synchronization

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create or upgrade the database schema, then exit.",
        discussion: """
            With --partition-history, --partition-deliveries or --partition-events, an existing PostgreSQL database's \
            table is then partitioned by month while Herald goes on serving (docs/durability.md, \
            "Month partitions on PostgreSQL"); a new database's are partitioned from the start.
            """
    )

    @OptionGroup var common: CommonOptions

    @Flag(help: "Partition an existing PostgreSQL database's history by month, online.")
    var partitionHistory = false

    @Flag(help: "Partition an existing PostgreSQL database's deliveries by month, online.")
    var partitionDeliveries = false

    @Flag(help: "Partition an existing PostgreSQL database's engagement events by month, online.")
    var partitionEvents = false

    /// The tables asked for, in the order they are converted.
    var tables: [MonthPartitionedTable] {
        (partitionHistory ? [.history] : []) + (partitionDeliveries ? [.deliveries] : []) + (partitionEvents ? [.events] : [])
    }

    func run() async throws {
        let configuration = try await reportingErrors { try await common.load() }
        if let table = tables.first, StorageLocation.sqlitePath(configuration.database) != nil {
            StandardStream.error.line(
                "herald: error: --partition-\(table.table) is for PostgreSQL; SQLite purges in small batches and keeps its file's size (docs/durability.md)"
            )
            throw ExitCode.failure
        }
        let store = try await common.openStore(configuration, ifMissing: .create)
        StandardStream.output.line("migrated")
        guard !tables.isEmpty, let postgres = store as? PostgresStore else { return await store.close() }
        for table in tables {
            let started = ContinuousClock.now
            let prefix = "partition-\(table.table)"
            do {
                try await reportingErrors {
                    // Written at once: an operator (or a supervisor) watches these lines as they come.
                    try await postgres.partition(table) { step in StandardStream.output.line("\(prefix): \(step)") }
                }
            } catch {
                await store.close()
                throw error
            }
            StandardStream.output.line("\(prefix): done in \(ContinuousClock.now - started)")
        }
        await store.close()
    }
}
