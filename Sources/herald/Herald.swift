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

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the HTTP server and the delivery workers (the default).")

    @OptionGroup var common: CommonOptions

    @Option(help: "Address to listen on (default 127.0.0.1).")
    var host: String?

    @Option(parsing: .unconditional, help: "Port to listen on (default 8080; 0 picks a free port).")
    var port: Int?

    @Option(name: .customLong("public-base-url"), help: "Prefix for resource paths in delivered URLs.")
    var publicBaseURL: String?

    func run() async throws {
        var extra: [String: String] = [:]
        if let host { extra["host"] = host }
        if let port { extra["port"] = String(port) }
        if let publicBaseURL { extra["public_base_url"] = publicBaseURL }
        let configuration = try await reportingErrors { try await common.load(extra: extra) }
        // Before the server's event loops and workers exist: heaps one per core, files up to the hard limit.
        ProcessTuning.applyForServer()
        let server = try await reportingErrors { try await HeraldServer.start(configuration) }
        let host = configuration.host
        let listening = Atomic(false)
        do {
            try await server.run { port in
                listening.store(true, ordering: .relaxed)
                // Scripts and tests read this line to learn the port (with --port 0); written
                // unbuffered so a pipe sees it at once.
                StandardStream.output.write("Herald listening on http://\(host):\(port)\n")
            }
        } catch  where !listening.load(ordering: .relaxed) {
            // A port in use or a host that is not this machine's: say which setting, not NIO's
            // `bind(descriptor:ptr:bytes:)`.
            StandardStream.error.line(
                "herald: error: cannot listen on \(host) port \(configuration.port) (host, port; HERALD_HOST, HERALD_PORT; --host, --port): \(error)")
            throw ExitCode.failure
        }
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Create or upgrade the database schema, then exit.")

    @OptionGroup var common: CommonOptions

    func run() async throws {
        _ = try await common.openStore(ifMissing: .create)
        print("migrated")
    }
}

struct Sinks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the configured delivery sinks with their health and delivery counters.")

    @OptionGroup var common: CommonOptions

    func run() async throws {
        let configuration = try await reportingErrors { try await common.load() }
        // Refused before the server starts, which would make the database or fill it.
        try await common.openStore(configuration, ifMissing: .refuse).close()
        let server = try await reportingErrors { try await HeraldServer.start(configuration) }
        let counters: [SinkCounters]
        do {
            counters = try await server.store.sinkCounters()
        } catch {
            await server.close()
            return try await reportingErrors { throw error }
        }
        let health = await SinkHealthReport.collect(server.sinks, circuits: server.engine.circuits, queue: server.store)
        await server.close()
        func row(_ name: String, _ kind: String, _ state: String) -> [String] {
            let counts = counters.first { $0.sink == name }
            let numbers = DeliveryState.allCases.map { String(counts?.counts[$0] ?? 0) }
            return [name, kind, state] + numbers + [counts?.lastError.map { String($0.prefix(80)) } ?? ""]
        }
        // Sinks with stored deliveries that this configuration no longer has are listed too:
        // their pending deliveries wait for the sink to come back.
        let configured = Set(server.sinks.names)
        let rows =
            health.map { row($0.name, $0.kind, $0.reason.map { "degraded: \($0)" } ?? "ok") }
            + counters.filter { !configured.contains($0.sink) }.map { row($0.sink, "-", "not configured") }
        let header = ["SINK", "KIND", "STATE"] + DeliveryState.allCases.map { $0.rawValue.uppercased() } + ["LAST ERROR"]
        let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
        for row in [header] + rows {
            print(
                zip(row, widths).map { $0.0.padding(toLength: $0.1, withPad: " ", startingAt: 0) }.joined(separator: "  ").trimmingCharacters(in: .whitespaces))
        }
    }
}

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
