import Foundation
public import HeraldCore
public import Logging
import PostgresNIO
import Synchronization

/// Herald's storage on PostgreSQL (postgres-nio's pooled `PostgresClient`), for several Herald
/// processes sharing one database.
///
/// ```swift
/// let store = try PostgresStore(url: "postgres://herald:secret@127.0.0.1:5432/herald")
/// try await store.migrate()
/// ```
///
/// Workers in any process claim deliveries with `FOR UPDATE SKIP LOCKED`, and every commit
/// that queues deliveries sends a `NOTIFY` that wakes idle workers in every process.
public final class PostgresStore: HeraldStorage, PortalSessionStore {
    /// The channel that accept transactions notify when they queue deliveries (an empty
    /// payload), and that transactions failing leased deliveries notify with their ids
    /// (``WithdrawalMessage``): one listening connection per process serves both.
    static let workChannel = "herald_work"
    /// ``StoreChange``s for live streams, one per payload (``StoreChangeMessage``).
    static let changeChannel = "herald_changes"

    let pool: PostgresPool
    let configuration: PostgresClient.Configuration
    let logger: Logger
    /// Whether the statements run per group commit and delivery batch are prepared.
    let preparation = StatementPreparation()
    /// Concurrent accepts share a transaction, so one commit serves many requests.
    let accepts: GroupCommit<AcceptRequest, AcceptResult>
    /// And device registrations.
    let registrations: GroupCommit<StoredRegistration, RegistrationOutcome>
    /// Where the reads that tolerate lag go while it is current (`database_read_url`).
    let replica: PostgresReadReplica?
    /// Feature modules' tables, erasure steps and delivery hooks (``StorageModule``).
    package let modules: StorageModules
    /// When a month that was busy or kept may be looked at again, by partition
    /// (``dropExpiredPartitions(of:before:)``).
    let partitionDropsResume = Mutex<[String: ContinuousClock.Instant]>([:])
    /// Each partitioned table's months as last read from the catalog, and when
    /// (``recentPartitions(of:)``).
    let partitionLists = Mutex<[String: (read: ContinuousClock.Instant, partitions: [MonthPartitionedTable.Partition]?)]>([:])

    /// - Parameter url: `postgres://user:password@host:port/database`, optionally with
    ///   `?sslmode=disable|prefer|require` (default `prefer`).
    /// - Parameter maxPendingAccepts: accepts that may wait for a group commit at once; more
    ///   are refused with a 503 (`server.max_pending_accepts`).
    /// - Parameter acquireTimeout: how long an operation waits for a pooled connection before
    ///   it is refused as `storage_unavailable` (and a direct check for an outage starts).
    /// - Parameter readURL: a streaming replica of the same database, in the same form, for the
    ///   reads that tolerate its lag (``withReadConnection(_:)``); nil reads everything here.
    /// - Parameter modules: feature modules whose tables, erasure and delivery hooks the store
    ///   runs (``StorageModule``).
    public init(
        url: String, readURL: String? = nil, maxConnections: Int = 20, maxPendingAccepts: Int = 10_000,
        acquireTimeout: Duration = PostgresStore.defaultAcquireTimeout, modules: [StorageModule] = [], logger: Logger = Logger(label: "herald.postgres")
    ) throws {
        let modules = try StorageModules(modules)
        self.modules = modules
        let configuration = try Self.configuration(url: url, maxConnections: maxConnections)
        // Both URLs are checked before either pool starts, so a refused setting leaves nothing running.
        let replicaConfiguration = try readURL.map { try Self.configuration(url: $0, setting: "database_read_url", maxConnections: maxConnections) }
        let pool = PostgresPool(
            configuration: configuration, logger: logger, acquireTimeout: acquireTimeout, direct: Self.directConfiguration(url: url, from: configuration))
        self.pool = pool
        self.configuration = configuration
        self.logger = logger
        if let readURL, let replicaConfiguration {
            let replica = PostgresReadReplica(
                configuration: replicaConfiguration, direct: Self.directConfiguration(url: readURL, from: replicaConfiguration), logger: logger)
            replica.startWatching(primary: pool)
            self.replica = replica
        } else {
            replica = nil
        }
        let preparation = self.preparation
        accepts = GroupCommit(maxWaiting: maxPendingAccepts) { requests in
            let outcomes = try await Self.transaction(pool, preparation: preparation, logger: logger) { session in
                try await Self.accept(batch: requests, session, modules: modules)
            }
            return AcceptOutcome.handOver(outcomes, of: requests)
        }
        registrations = GroupCommit(maxWaiting: maxPendingAccepts) { requests in
            try await Self.register(batch: requests, pool, preparation: preparation, logger: logger)
        }
    }

    /// Closes the pools' connections.
    public func close() async {
        await replica?.close()
        await pool.close()
    }

    @discardableResult public func migrate() async throws -> [String] {
        let commits: String?
        let unknown: [String]
        do {
            unknown = try await patientlyAtStartup {
                try await self.transaction { session in try await PostgresSchema.migrate(session, modules: self.modules) }
            }
            commits = try await withConnection { session in
                try await session.row("SHOW synchronous_commit")?.first?.decode(String.self)
            }
        } catch {
            // PSQLError's description hides details on purpose; the server's message and the
            // address (never the password) are what an operator needs here.
            throw HeraldError(.unavailable, code: "storage_unavailable", "cannot migrate PostgreSQL at \(address): \(describeAtStartup(error))")
        }
        // A 2xx means committed to disk. With `synchronous_commit = off` (the server's, the
        // database's or the role's default) PostgreSQL answers COMMIT before its WAL is flushed,
        // and a crash of PostgreSQL loses what Herald had answered 202 for: refuse to run on it.
        // Checked rather than set: a setting in the startup packet makes connection poolers such
        // as PgBouncer refuse every connection ("unsupported startup parameter"), and `SET` per
        // transaction would cost a round trip per group commit.
        guard commits != "off" else {
            throw HeraldError(
                .unavailable, code: "storage_unsafe",
                "PostgreSQL at \(address) commits asynchronously (synchronous_commit = off), so a crash of PostgreSQL could lose notifications Herald answered 202 for; set it on for Herald's role (ALTER ROLE <role> SET synchronous_commit = on) or database"
            )
        }
        do {
            try await prepareAhead(now: Date())
        } catch {
            // Until a maintenance pass manages it, rows land in their table's default partition.
            logger.warning("could not create partitions ahead: \(Self.describe(error))")
        }
        return unknown
    }

    /// Applies the migrations before `name` only: an older Herald's schema, for rehearsing and
    /// testing an upgrade from it.
    package func migrate(stoppingBefore name: String) async throws {
        _ = try await transaction { session in try await PostgresSchema.migrate(session, modules: self.modules, stoppingBefore: name) }
    }

    public func holdsSchema() async throws -> Bool {
        do {
            return try await patientlyAtStartup {
                try await self.withConnection { session in
                    try await session.row("SELECT to_regclass('herald_migrations') IS NOT NULL")?.first?.decode(Bool.self) == true
                }
            }
        } catch {
            throw HeraldError(.unavailable, code: "storage_unavailable", "cannot read PostgreSQL at \(address): \(describeAtStartup(error))")
        }
    }

    /// `error`, or, when the database was turned away for good, why (the server's words for a
    /// database that does not exist or a role or password it does not take; no TLS where it is
    /// required; an address that refuses connections or a name that does not resolve), which
    /// the pool's own error does not carry: for the operator starting Herald, never in an
    /// answer to a request.
    private func describeAtStartup(_ error: any Error) -> String {
        pool.unreachableReason ?? Self.describe(error)
    }

    /// Runs `body`, the first use of the pool, again while the server is reachable but lends no
    /// connection in time. The first connection includes the TCP connect and authentication
    /// (SCRAM hashes on both ends), which on a loaded machine can outlast one acquire timeout,
    /// and so can the pool's direct check that follows (then the database is marked unreachable
    /// for slowness, and probed): a server that is reachable but slow gets more time at
    /// startup; one that refuses or breaks connections fails at once.
    private func patientlyAtStartup<T>(_ body: () async throws -> T) async throws -> T {
        let patience = ContinuousClock.now + Self.startupPatience
        while true {
            do {
                return try await body()
            } catch let error as HeraldError
                where error.code == "storage_unavailable" && ContinuousClock.now < patience
                && (error == PostgresPool.busy && pool.isReachable || error == PostgresPool.replaced || pool.isUnreachableForSlowness)
            {
                logger.info("PostgreSQL at \(address) lent no connection in time; trying again")
                // While it is marked unreachable every call fails at once: wait for the probe.
                if !pool.isReachable { try await Task.sleep(for: pool.probeInterval) }
            }
        }
    }

    /// How long an operation waits for a pooled connection by default: a busy pool is not an
    /// outage, but a request should not wait long behind one.
    public static let defaultAcquireTimeout = Duration.seconds(2)

    /// How long a pooled connection stays open unused.
    static let connectionIdleTimeout = Duration.seconds(10)

    /// How long ``migrate()`` keeps asking a reachable but busy server for its first connection.
    static let startupPatience = Duration.seconds(20)

    /// host:port/database, without credentials, for messages.
    var address: String {
        "\(configuration.host ?? "?"):\(configuration.port ?? 5432)/\(configuration.database ?? "")"
    }

    static func describe(_ error: any Error) -> String {
        guard let error = error as? PSQLError else {
            // The pool gives up after repeated connection failures with an opaque error.
            if "\(error)".contains("CircuitBreaker") { return "no connection could be made; is PostgreSQL running there and reachable?" }
            return "\(error)"
        }
        if let message = error.serverInfo?[.message] { return message }
        if let underlying = error.underlying { return "\(underlying)" }
        return "\(error.code)"
    }

    public func ping() async throws {
        try await withConnection { session in _ = try await session.rows("SELECT 1") }
    }

    /// Parses a `postgres://` (or `postgresql://`) URL into a client configuration for a pool of
    /// at most `maxConnections` (two at least: one listens); an error names `setting`.
    static func configuration(url: String, setting: String = "database", maxConnections: Int = 20) throws -> PostgresClient.Configuration {
        func invalid(_ reason: String) -> HeraldError {
            HeraldError(
                .unprocessable, code: "invalid_config", "\(setting) URL is not usable: \(reason) (expected postgres://user:password@host:port/database)")
        }
        guard let components = URLComponents(string: url), let scheme = components.scheme, ["postgres", "postgresql"].contains(scheme) else {
            throw invalid("not a postgres:// URL")
        }
        guard let host = components.host, !host.isEmpty else { throw invalid("no host") }
        guard let user = components.user, !user.isEmpty else { throw invalid("no user name") }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        guard !database.isEmpty else { throw invalid("no database name") }
        // NIO takes the port as 16 bits: 99999 connected to 34463.
        if let port = components.port, !(1...65_535).contains(port) { throw invalid("port \(port) is not 1-65535") }
        let tls: PostgresClient.Configuration.TLS
        switch components.queryItems?.first(where: { $0.name == "sslmode" })?.value ?? "prefer" {
        case "disable": tls = .disable
        case "prefer": tls = .prefer(.makeClientConfiguration())
        case "require": tls = .require(.makeClientConfiguration())
        case let other: throw invalid("sslmode '\(other)' is not one of disable, prefer, require")
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: components.port ?? 5432, username: user.removingPercentEncoding ?? user,
            password: components.password?.removingPercentEncoding, database: database, tls: tls
        )
        // postgres-nio 1.33's pool starts an idle timer (and a keep-alive timer) for every
        // connection it takes back, and each lives its full duration even when the connection is
        // lent again at once: memory grew by about 1.5 KB per operation for the timer's length
        // (60 s by default: 200 MiB at 3 000 operations a second; docs/performance.md, "Memory
        // on PostgreSQL"). A short idle timeout bounds that, and the keep-alive ping is moot when
        // idle connections close sooner than it would run.
        configuration.options.keepAliveBehavior = nil
        configuration.options.connectionIdleTimeout = Self.connectionIdleTimeout
        configuration.options.maximumConnections = max(2, maxConnections)
        return configuration
    }

    /// The same settings for one connection outside the pool (``PostgresPool``'s check for a
    /// server that refuses the login); nil for a Unix socket, or when no TLS context can be made.
    static func directConfiguration(url: String, from client: PostgresClient.Configuration) -> PostgresConnection.Configuration? {
        guard let host = client.host, let port = client.port else { return nil }
        let tls: PostgresConnection.Configuration.TLS
        switch URLComponents(string: url)?.queryItems?.first(where: { $0.name == "sslmode" })?.value ?? "prefer" {
        case "disable": tls = .disable
        case let mode:
            guard let context = try? NIOSSLContext(configuration: .makeClientConfiguration()) else { return nil }
            tls = mode == "require" ? .require(context) : .prefer(context)
        }
        return PostgresConnection.Configuration(
            host: host, port: port, username: client.username, password: client.password, database: client.database, tls: tls)
    }

    /// Runs `body` on one pooled connection, outside a transaction: each statement commits by itself.
    package func withConnection<Result: Sendable>(_ body: @escaping @Sendable (PostgresSession) async throws -> Result) async throws -> Result {
        let (logger, preparation) = (self.logger, self.preparation)
        return try await pool.withConnection { connection in
            try await body(PostgresSession(connection: connection, preparation: preparation, logger: logger))
        }
    }

    /// Runs `body` in one transaction: committed if it returns, rolled back if it throws.
    package func transaction<Result: Sendable>(_ body: @escaping @Sendable (PostgresSession) async throws -> Result) async throws -> Result {
        try await Self.transaction(pool, preparation: preparation, logger: logger, body)
    }

    /// `body` may run more than once (``retryingConflicts(logger:_:)``): it talks to the
    /// database through its session and returns what it found, and does nothing else.
    static func transaction<Result: Sendable>(
        _ pool: PostgresPool, preparation: StatementPreparation, logger: Logger, _ body: @escaping @Sendable (PostgresSession) async throws -> Result
    ) async throws -> Result {
        try await retryingConflicts(logger: logger) {
            do {
                return try await pool.run { client, acquired in
                    try await client.withTransaction(logger: logger) { connection in
                        try acquired(connection)
                        return try await body(PostgresSession(connection: connection, preparation: preparation, logger: logger))
                    }
                }
            } catch let error as PostgresTransactionError {
                // The caller's own error (a validation failure, say) matters more than the wrapper.
                throw error.closureError ?? error
            }
        }
    }

    /// Runs `attempt` again, up to three times in all, when PostgreSQL rolled it back to break
    /// a deadlock or a serialization conflict (SQLSTATE 40P01, 40001). Writers of a user's rows
    /// lock them in one order (docs/durability.md), but rows locked by one statement are locked
    /// in the order its plan visits them, so two statements over the same rows (a worker's
    /// record and an erasure failing the user's deliveries) can still cross; the one rolled
    /// back holds nothing any more, and its second run finds the other committed.
    static func retryingConflicts<Result>(logger: Logger, _ attempt: () async throws -> Result) async throws -> Result {
        var runs = 1
        while true {
            do {
                return try await attempt()
            } catch  where runs < 3 && PostgresPool.isConflict(error) {
                runs += 1
                logger.notice("a transaction was rolled back to break a lock conflict; running it again", metadata: ["run": "\(runs)"])
            }
        }
    }

    package static func micros(_ date: Date) -> Int64 { Timestamp.microseconds(date) }

    /// Holds one pooled connection to `LISTEN` on `channel`, calling `heard` per notification,
    /// until the task is cancelled or the connection is lost (then it throws).
    func listen(on channel: String, _ heard: @escaping @Sendable () -> Void) async throws {
        try await listen(on: channel) { (_: String) in heard() }
    }

    /// Like ``listen(on:_:)-(_,()->Void)``, with each notification's payload.
    func listen(on channel: String, _ heard: @escaping @Sendable (String) -> Void) async throws {
        try await pool.withConnection { connection in
            try await connection.listen(on: channel) { notifications in
                for try await notification in notifications { heard(notification.payload) }
            }
        }
    }

    public func watchChanges(_ heard: @escaping @Sendable (StoreChange) -> Void) async throws {
        try await listen(on: Self.changeChannel) { (payload: String) in
            if let change = StoreChangeMessage.change(payload) { heard(change) }
        }
    }
}

/// One connection lent to a store operation.
package struct PostgresSession: Sendable {
    let connection: PostgresConnection
    let preparation: StatementPreparation
    let logger: Logger

    package func rows(_ query: PostgresQuery) async throws -> [PostgresRandomAccessRow] {
        try await connection.query(query, logger: logger).collect().map { $0.makeRandomAccess() }
    }

    package func row(_ query: PostgresQuery) async throws -> PostgresRandomAccessRow? {
        try await rows(query).first
    }

    package func execute(_ query: PostgresQuery) async throws {
        _ = try await connection.query(query, logger: logger).collect()
    }

    /// Runs a statement ending in `RETURNING …` and counts the rows it touched.
    func count(_ query: PostgresQuery) async throws -> Int {
        try await connection.query(query, logger: logger).collect().count
    }

    /// Wakes idle workers in every process once this transaction commits.
    func notifyWork() async throws {
        try await notify(PostgresStore.workChannel)
    }

    /// Tells every process listening on `channel`, once this transaction commits.
    func notify(_ channel: String, payload: String = "") async throws {
        try await execute("SELECT pg_notify(\(channel), \(payload))")
    }

    /// Tells every process's live streams about `change`, once this transaction commits.
    /// One statement however many payloads the change needs.
    func announce(_ change: StoreChange) async throws {
        let payloads = StoreChangeMessage.payloads(change)
        guard !payloads.isEmpty else { return }
        try await execute("SELECT pg_notify(\(PostgresStore.changeChannel), payload) FROM UNNEST(\(payloads)::text[]) AS payload")
    }
}

extension PostgresRandomAccessRow: StoredRow {
    package func text(_ column: String) throws -> String { try cell(column).decode(String.self) }
    package func optionalText(_ column: String) throws -> String? { try cell(column).decode(String?.self) }
    package func integer(_ column: String) throws -> Int64 { try cell(column).decode(Int64.self) }
    package func optionalInteger(_ column: String) throws -> Int64? { try cell(column).decode(Int64?.self) }

    /// The cell of `column`. postgres-nio's own subscript stops the process when a row lacks the
    /// column (a schema another Herald version migrated, say): here that is a storage error.
    package func cell(_ column: String) throws -> PostgresCell {
        guard contains(column) else { throw HeraldError(.internal, code: "storage_corrupt", "the database returned no column \(column)") }
        return self[column]
    }
}

extension PostgresStore {
    /// Creates an empty database on the server `serverURL` points at and returns a URL for it,
    /// for tests and first-time setup tools. `name` is letters, digits and underscores.
    public static func createDatabase(named name: String, onServer serverURL: String) async throws -> String {
        guard !name.isEmpty, name.utf8.allSatisfy({ $0 == UInt8(ascii: "_") || (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) }) else {
            throw HeraldError(.badRequest, code: "invalid_name", "database name '\(name)' must be lower-case letters, digits and underscores")
        }
        guard var components = URLComponents(string: serverURL) else { throw HeraldError(.badRequest, code: "invalid_config", "not a URL: \(serverURL)") }
        // Quiet: the pool warns when the first query races its start, and errors are thrown anyway.
        let quiet = Logger(label: "herald.postgres.setup", factory: { _ in SwiftLogNoOpLogHandler() })
        let client = PostgresClient(configuration: try configuration(url: serverURL), backgroundLogger: quiet)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \"\(name)\""))
        }
        components.path = "/" + name
        guard let url = components.string else { throw HeraldError(.internal, code: "invalid_config", "could not build a URL for \(name)") }
        return url
    }
}
