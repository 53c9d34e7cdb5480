import Foundation
import GRDB
public import HeraldCore

/// Herald's storage on an embedded SQLite database (GRDB), in WAL mode.
///
/// ```swift
/// let store = try SQLiteStore(path: "herald.sqlite")
/// try await store.migrate()
/// ```
public final class SQLiteStore: HeraldStorage, PortalSessionStore {
    package let writer: any DatabaseWriter
    /// Concurrent accepts share a transaction, so one fsync serves many requests.
    let accepts: GroupCommit<AcceptRequest, AcceptResult>
    /// And the short writes apps make once per request (device registrations on every start,
    /// seen cards, promotions, read marks, settings, topic subscriptions), together in one
    /// group commit whatever their kind (``groupCommitted(_:)``): one fsync each held SQLite's
    /// single writer for about a millisecond.
    let appWrites: GroupCommit<AppWrite, any Sendable>
    /// Claims, records and fan-out pages, one at a time (``BackgroundWriteTurns``).
    let backgroundWrites = BackgroundWriteTurns()
    /// This process's commits (``CommitCounter``): a read answered from memory is current while the count has not moved.
    package let commits = CommitCounter()
    /// Only this process writes the file, so its own commits are every change there is.
    let changes: Broadcaster<StoreChange>
    /// Feature modules' tables, erasure steps and delivery hooks (``StorageModule``).
    package let modules: StorageModules

    /// Opens (creating if needed) the database at `path`; `":memory:"` keeps it in memory.
    /// - Parameter maxPendingAccepts: accepts that may wait for a group commit at once; more
    ///   are refused with a 503 (`server.max_pending_accepts`).
    /// - Parameter busyTimeout: how long a write waits for another process's lock before it
    ///   is answered 503.
    /// - Parameter modules: feature modules whose tables, erasure and delivery hooks the store
    ///   runs (``StorageModule``).
    public init(path: String, maxPendingAccepts: Int = 10_000, busyTimeout: Duration = .seconds(5), modules: [StorageModule] = []) throws {
        let modules = try StorageModules(modules)
        self.modules = modules
        var configuration = Configuration()
        // Another Herald process (`herald keys create` beside a running server) may hold the
        // write lock for a moment: wait for it rather than failing.
        configuration.busyMode = .timeout(busyTimeout.seconds)
        if path != ":memory:" { SQLiteFileMode.createPrivately(path) }
        let writer: any DatabaseWriter =
            path == ":memory:" ? try DatabaseQueue(configuration: configuration) : try DatabasePool(path: path, configuration: configuration)
        // FULL: a commit is on disk before Herald answers 202, so not even a power cut loses
        // an accepted notification (NORMAL survives only a process crash). Set here, on the
        // writer, and not in `prepareDatabase`: a pool switches its writer to WAL after that
        // runs and sets `synchronous = NORMAL` as it does, so the setting never took effect.
        try writer.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        self.writer = writer
        writer.add(transactionObserver: commits, extent: .databaseLifetime)
        let file = path == ":memory:" ? nil : path
        self.file = file
        let changes = Broadcaster<StoreChange>()
        self.changes = changes
        accepts = GroupCommit(maxWaiting: maxPendingAccepts) { requests in
            try Self.checkFile(file)
            let (results, historyUsers) = try await writer.writeWithoutTransaction { db in
                var historyUsers: [String] = []
                var outcomes: [AcceptOutcome] = []
                try db.inTransaction {
                    let recipients = try Self.recipients(db, of: requests)
                    outcomes = try requests.map { try Self.accept($0, db, recipients: recipients, historyUsers: &historyUsers, modules: modules) }
                    return .commit
                }
                // Committed, and still on the writer: a later write that fails some of these
                // (a device registered by another user, a user erased) runs after the copies
                // are in the hand-off, so the withdrawal that follows it finds them.
                return (AcceptOutcome.handOver(outcomes, of: requests), historyUsers)
            }
            if !historyUsers.isEmpty { changes.send(.history(users: historyUsers.uniqued())) }
            return results
        }
        appWrites = GroupCommit(maxWaiting: maxPendingAccepts) { requests in
            try Self.checkFile(file)
            return try await writer.write { db in try requests.map { try $0.run(db) } }
        }
    }

    /// A write of the delivery engine or the fan-out worker, in its turn (``BackgroundWriteTurns``).
    func backgroundWrite<Result: Sendable>(_ updates: @escaping @Sendable (Database) throws -> Result) async throws -> Result {
        try await backgroundWrites.run { try await writer.write(updates) }
    }

    /// The database file, nil in memory.
    package let file: String?

    /// A database file deleted under a running server would take every later write with it
    /// (to an unlinked inode): refuse instead, so nothing is answered 2xx and then lost. The
    /// answer goes to API clients: it names no path (the operator's start-up log names the
    /// database).
    package static func checkFile(_ path: String?) throws {
        guard let path, !FileManager.default.fileExists(atPath: path) else { return }
        throw HeraldError(.unavailable, code: "storage_unavailable", "the SQLite database file is gone (deleted or moved while Herald ran)")
    }

    /// Runs the store's migrations, then its modules' (``StorageModule/Migration``).
    /// - Returns: migrations recorded in the database that this store does not know (a newer
    ///   Herald's); a module's that is no longer given are not among them.
    @discardableResult public func migrate() async throws -> [String] {
        var migrator = SQLiteSchema.migrator
        for (name, migration) in modules.migrations {
            migrator.registerMigration(name) { db in
                for statement in migration.sqlite { try db.execute(sql: statement) }
            }
        }
        try migrator.migrate(writer)
        return try await writer.read { [migrator] db in
            try migrator.appliedIdentifiers(db).subtracting(migrator.migrations).filter { !StorageModules.isModuleMigration($0) }.sorted()
        }
    }

    public func holdsSchema() async throws -> Bool {
        try await writer.read { db in try SQLiteSchema.isPresent(in: db) }
    }

    /// ``holdsSchema()`` for the file at `path`, read through a read-only connection: opening a
    /// store switches the file to WAL, which would change another program's database that a
    /// mistyped setting names. Nil when it cannot be read (not a database, not readable).
    public static func holdsSchema(atPath path: String) -> Bool? {
        var configuration = Configuration()
        configuration.readonly = true
        guard let reader = try? DatabaseQueue(path: path, configuration: configuration) else { return nil }
        defer { try? reader.close() }
        return try? reader.read { db in try SQLiteSchema.isPresent(in: db) }
    }

    /// Closes the connections (checkpointing the WAL). A connection still in use keeps the
    /// database open; later use throws.
    public func close() async {
        try? writer.close()
    }

    public func ping() async throws {
        try Self.checkFile(file)
        _ = try await writer.read { db in try Int.fetchOne(db, sql: "SELECT 1") }
    }

    public func watchChanges(_ heard: @escaping @Sendable (StoreChange) -> Void) async throws {
        await changes.listen(heard)
    }

    package static func micros(_ date: Date) -> Int64 { Timestamp.microseconds(date) }
    static func date(_ micros: Int64?) -> Date? { micros.map(Timestamp.date(microseconds:)) }

    /// `?, ?, ?` for an IN list of `count` values.
    package static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }

    /// An IN list for a cached statement: its placeholders rounded up to a power of two, the
    /// last value repeated to fill them (an IN list is a set, so the repeats change nothing).
    /// A statement is cached per SQL text, and each text holds a compiled program the size of
    /// its list: with one text per length, the claim and recipient reads kept hundreds of
    /// programs per connection (about 11 MiB of peak RSS under the end-to-end benchmark).
    static func inList<Value: DatabaseValueConvertible>(_ values: some RandomAccessCollection<Value>) -> (placeholders: String, arguments: StatementArguments) {
        guard let last = values.last else { return ("", StatementArguments()) }
        var count = 1
        while count < values.count { count <<= 1 }
        return (placeholders(count), StatementArguments(values) + StatementArguments(repeatElement(last, count: count - values.count)))
    }
}

/// A row of a statement whose column positions were looked up once for all its rows: the
/// claim and recipient reads decode 20 to 30 columns by name per row, and a dictionary built
/// once per read costs less than any per-row search.
struct PositionedRow: StoredRow {
    let row: Row
    let positions: ColumnPositions

    /// Every row `statement` gives for `arguments`.
    static func fetchAll(_ statement: Statement, arguments: StatementArguments) throws -> [PositionedRow] {
        let positions = ColumnPositions(statement.columnNames)
        return try Row.fetchAll(statement, arguments: arguments).map { PositionedRow(row: $0, positions: positions) }
    }

    package func optionalText(_ column: String) throws -> String? {
        guard let index = positions.index[column] else { return try row.optionalText(column) }
        return try row.decode(String?.self, atIndex: index)
    }

    package func optionalInteger(_ column: String) throws -> Int64? {
        guard let index = positions.index[column] else { return try row.optionalInteger(column) }
        return try row.decode(Int64?.self, atIndex: index)
    }
}

/// Column name to position for one statement's rows; the leftmost of equal names wins, as in GRDB.
final class ColumnPositions: Sendable {
    let index: [String: Int]

    init(_ names: [String]) {
        index = Dictionary(names.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
    }
}

extension Row: StoredRow {
    package func optionalText(_ column: String) throws -> String? {
        if let index = storedIndex(column) { return try decode(String?.self, atIndex: index) }
        return try decode(String?.self, forColumn: column)
    }

    package func optionalInteger(_ column: String) throws -> Int64? {
        if let index = storedIndex(column) { return try decode(Int64?.self, atIndex: index) }
        return try decode(Int64?.self, forColumn: column)
    }

    /// The column's index when the row names it exactly as asked. GRDB's lookup by name is
    /// case-insensitive and lower-cases each column name it passes, per lookup: that was 2.5 %
    /// of the server's CPU (a claim reads 30 columns by name). Herald's SQL names its columns in
    /// lower case, so an exact comparison finds them; anything else falls back to GRDB's
    /// lookup. Decoding throws where a subscript would trap on a value of the wrong type.
    private func storedIndex(_ column: String) -> Int? {
        var index = 0
        for (name, _) in self {
            if name == column { return index }
            index += 1
        }
        return nil
    }
}
