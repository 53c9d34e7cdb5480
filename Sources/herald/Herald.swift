import ArgumentParser
import Foundation
import HeraldCore
import HeraldProcessTuning
import HeraldServer
import HeraldStore
import Synchronization

@main
struct Herald: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "herald",
        abstract: "Herald, a self-hosted notification router.",
        discussion: "Every option also reads HERALD_<NAME> from the environment (HERALD_PORT, HERALD_DATABASE, …).",
        subcommands: [
            Serve.self, Migrate.self, Backup.self, Keys.self, Users.self, UserTokenCommand.self, Sinks.self, Healthcheck.self, VAPIDCommand.self,
            FCMEmulatorCommand.self,
            APNsEmulatorCommand.self, WebPushEmulatorCommand.self,
        ],
        defaultSubcommand: Serve.self
    )

    /// The arguments' bytes are checked before ArgumentParser reads them as text (see
    /// ``CommandLineText``): a byte that is not UTF-8 would become U+FFFD, another value.
    static func main() async {
        if let problem = CommandLineText.problem() { Self.exit(withError: ValidationError(problem)) }
        await Self.main(nil)
        if let problem = StandardStream.flushPrinted() {
            StandardStream.error.line("herald: error: \(problem)")
            Self.exit(withError: ExitCode(74))
        }
    }
}

/// Options every subcommand that touches storage shares.
struct CommonOptions: ParsableArguments {
    @Option(help: "Configuration file (YAML). Default: herald.yaml when it exists, or $HERALD_CONFIG.")
    var config: String?

    @Option(help: "sqlite:PATH (default sqlite:herald.sqlite) or postgres://user:password@host:port/database.")
    var database: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String?

    /// Options given on the command line, as configuration keys; they win over everything.
    var overrides: [String: String] {
        var values: [String: String] = [:]
        if let database { values["database"] = database }
        if let logLevel { values["log_level"] = logLevel }
        return values
    }

    func load(extra: [String: String] = [:]) async throws -> HeraldConfiguration {
        var file = config ?? ProcessInfo.processInfo.environment["HERALD_CONFIG"]
        if file == nil, FileManager.default.fileExists(atPath: "herald.yaml") { file = "herald.yaml" }
        return try await HeraldConfiguration.load(configFile: file, overrides: overrides.merging(extra) { _, new in new })
    }

    /// What an admin subcommand does when its SQLite file is not there.
    enum MissingDatabase {
        /// `herald migrate`: making it is the command's job.
        case create
        /// `keys create`: a key may be made before the first `serve`, but the file is named on
        /// stderr, so a mistyped path or the wrong working directory shows.
        case createAndSay
        /// Listing, revoking, erasing or reading counters in a database that is not there is a
        /// mistake: a new empty file beside it would be reported as done while the server's
        /// database never saw it.
        case refuse

        /// Says so, or refuses, when `database` names a SQLite file that does not exist.
        /// - Returns: whether it did not exist (and was said to be created).
        @discardableResult
        func check(_ database: String) throws -> Bool {
            guard let path = StorageLocation.sqlitePath(database), StorageLocation.isFilePath(path), !FileManager.default.fileExists(atPath: path)
            else { return false }
            let shown = Self.shown(database)
            try answer(
                saying: "there was no database at '\(shown)'; created it",
                refusing: "there is no SQLite database at '\(shown)' (database, HERALD_DATABASE, --database); herald serve or herald migrate creates one")
            return true
        }

        /// Says so, or refuses, when the database holds none of Herald's tables: a PostgreSQL
        /// database that exists but is not Herald's (a mistyped name, the server's default
        /// `postgres`, the application's own), or an empty SQLite file. Migrating it would fill it
        /// with Herald's tables and answer as though the command had done its work.
        func checkSchema(_ holdsSchema: Bool, of database: String) throws {
            guard !holdsSchema else { return }
            let shown = Self.shown(database)
            try answer(
                saying: "the database at '\(shown)' held no Herald tables; created them",
                refusing:
                    "the database at '\(shown)' holds no Herald tables: it is empty or another program's (database, HERALD_DATABASE, --database); herald serve or herald migrate creates them"
            )
        }

        /// The database as these messages name it: a SQLite file by its absolute path (a
        /// relative one is what goes wrong in the wrong directory), PostgreSQL without its
        /// credentials.
        private static func shown(_ database: String) -> String {
            guard let path = StorageLocation.sqlitePath(database) else { return RedactedURL.describe(database) }
            return StorageLocation.isFilePath(path) ? URL(fileURLWithPath: path).standardizedFileURL.path : "sqlite:\(path)"
        }

        /// Nothing, a line on stderr, or an error, as the command's case asks.
        private func answer(saying said: String, refusing refusal: String) throws {
            switch self {
            case .create: break
            case .createAndSay: StandardStream.error.line("herald: \(said)")
            case .refuse: throw HeraldError(.notFound, code: "not_found", refusal)
            }
        }
    }

    /// The configured storage, migrated, for the admin subcommands.
    /// - Parameter loaded: the configuration, when the command has loaded it already.
    func openStore(_ loaded: HeraldConfiguration? = nil, ifMissing missing: MissingDatabase) async throws -> any ServerStorage {
        try await reportingErrors {
            let configuration: HeraldConfiguration
            if let loaded { configuration = loaded } else { configuration = try await load() }
            let database = configuration.database
            let created = try missing.check(database)
            // A SQLite file is read before it is opened for writing, which would switch another
            // program's database to WAL; one that cannot be read is left to the open to explain.
            let file = StorageLocation.sqlitePath(database).flatMap { StorageLocation.isFilePath($0) ? $0 : nil }
            if missing != .create, !created, let file, let holds = SQLiteStore.holdsSchema(atPath: file) { try missing.checkSchema(holds, of: database) }
            let store = try StorageLocation.open(database, logger: configuration.logger())
            do {
                if missing != .create, !created, file == nil { try missing.checkSchema(try await store.holdsSchema(), of: database) }
                if let warning = NewerSchema.warning(try await store.migrate()) { StandardStream.error.write("herald: warning: \(warning)\n") }
            } catch {
                await store.close()
                throw error
            }
            return store
        }
    }
}

/// Runs `body`, turning Herald's errors into one clear line on stderr and exit code 1.
func reportingErrors<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as HeraldError {
        StandardStream.error.write("herald: error: \(error.message)\n")
        throw ExitCode.failure
    }
}
