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
            With --partition-history, an existing PostgreSQL database's history is then partitioned \
            by month while Herald goes on serving (docs/durability.md, "History partitions on \
            PostgreSQL"); a new database's is partitioned from the start.
            """
    )

    @OptionGroup var common: CommonOptions

    @Flag(help: "Partition an existing PostgreSQL database's history by month, online.")
    var partitionHistory = false

    func run() async throws {
        let configuration = try await reportingErrors { try await common.load() }
        if partitionHistory, StorageLocation.sqlitePath(configuration.database) != nil {
            StandardStream.error.line(
                "herald: error: --partition-history is for PostgreSQL; SQLite's history is purged in small batches and keeps its file's size (docs/durability.md)"
            )
            throw ExitCode.failure
        }
        let store = try await common.openStore(configuration, ifMissing: .create)
        StandardStream.output.line("migrated")
        guard partitionHistory, let postgres = store as? PostgresStore else { return await store.close() }
        let started = ContinuousClock.now
        do {
            try await reportingErrors {
                // Written at once: an operator (or a supervisor) watches these lines as they come.
                try await postgres.partitionHistory { step in StandardStream.output.line("partition-history: \(step)") }
            }
        } catch {
            await store.close()
            throw error
        }
        await store.close()
        StandardStream.output.line("partition-history: done in \(ContinuousClock.now - started)")
    }
}
