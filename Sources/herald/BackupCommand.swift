import ArgumentParser
import Foundation
import HeraldCore
import HeraldProcessTuning
import HeraldServer
import HeraldStore
import Synchronization

struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy the SQLite database to a new file, consistently, while Herald runs.",
        discussion: """
            Copying herald.sqlite by hand while Herald runs is not a backup: recent commits are in its -wal file, \
            and a checkpoint during the copy tears it. This reads one snapshot without holding up the server. \
            To restore: stop Herald, put the copy in place of the database file (removing the old -wal and -shm \
            files beside it), start Herald. For PostgreSQL use pg_dump.
            """)

    @OptionGroup var common: CommonOptions

    @Argument(help: "The file to write; it must not exist yet.")
    var destination: String

    func run() async throws {
        let configuration = try await reportingErrors { try await common.load() }
        guard let source = StorageLocation.sqlitePath(configuration.database) else {
            StandardStream.error.line(
                "herald: error: herald backup copies SQLite databases; for PostgreSQL (\(configuration.database.prefix { $0 != ":" })) use pg_dump")
            throw ExitCode.failure
        }
        let started = ContinuousClock.now
        let summary = try await reportingErrors {
            try await SQLiteBackup.copy(from: source, to: destination) { written, total in
                StandardStream.error.line("backup: \(ByteCount.text(written)) written of about \(ByteCount.text(total))")
            }
        }
        let seconds = (ContinuousClock.now - started).components.seconds
        print("backed up \(source) to \(destination) (\(ByteCount.text(summary.bytes)), quick_check ok) in \(seconds) s")
    }
}
