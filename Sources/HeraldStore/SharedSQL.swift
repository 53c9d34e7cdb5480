public import HeraldCore

/// One statement both engines accept as written, for a feature module's store (docs/
/// architecture.md, "Feature modules"): its text names parameters `$1`, `$2`, … in the order
/// they first appear (PostgreSQL numbers them; SQLite binds a `$name` parameter by its first
/// appearance, so the two agree), and its values are text or 64-bit integers, the types both
/// stores keep (StoredRow).
public struct SharedStatement: Sendable, Equatable {
    public enum Value: Sendable, Equatable {
        case text(String?)
        case integer(Int64?)
    }

    public let text: String
    public let values: [Value]

    public init(_ text: String, _ values: Value...) {
        self.init(text, values: values)
    }

    /// A statement whose number of values is known when it runs (an `IN` list).
    public init(_ text: String, values: [Value]) {
        self.text = text
        self.values = values
    }

    /// A statement whose text `build` writes left to right, asking `parameter` for each value
    /// where it goes: the values are numbered in the order they are asked for, which is the
    /// order they appear in, as a shared statement requires.
    public static func numbering(_ build: (_ parameter: (Value) -> String) throws -> String) rethrows -> SharedStatement {
        var values: [Value] = []
        let text = try build { value in
            values.append(value)
            return "$\(values.count)"
        }
        return SharedStatement(text, values: values)
    }
}

/// A result row of a ``SharedStatement``, read out of the engine's own row: text and integer
/// columns by name, NULL as nil.
public struct SharedRow: Sendable, Equatable, StoredRow {
    let columns: [String: SharedStatement.Value]

    public func optionalText(_ column: String) throws -> String? {
        switch try value(column) {
        case .text(let text): text
        case .integer(let number): number.map(String.init)
        }
    }

    public func optionalInteger(_ column: String) throws -> Int64? {
        switch try value(column) {
        case .integer(let number): return number
        case .text(nil): return nil
        case .text(let text?):
            guard let number = Int64(text) else { throw HeraldError(.internal, code: "storage_corrupt", "column \(column) holds '\(text)', not an integer") }
            return number
        }
    }

    public func text(_ column: String) throws -> String {
        guard let value = try optionalText(column) else { throw StoredRecords.null(column) }
        return value
    }

    public func integer(_ column: String) throws -> Int64 {
        guard let value = try optionalInteger(column) else { throw StoredRecords.null(column) }
        return value
    }

    private func value(_ column: String) throws -> SharedStatement.Value {
        guard let value = columns[column] else { throw HeraldError(.internal, code: "storage_corrupt", "the database returned no column \(column)") }
        return value
    }
}

/// What a feature module's store runs its SQL through, whichever engine Herald stores in: SQLite
/// and PostgreSQL both offer it, so a module writes each statement once.
public protocol SharedSQLDatabase: Sendable {
    /// Reads `query`'s rows on any connection.
    func rows(_ query: SharedStatement) async throws -> [SharedRow]
    /// Reads each of `queries`' rows, in order, in one snapshot: a commit shows in all of them
    /// or in none.
    func rows(of queries: [SharedStatement]) async throws -> [[SharedRow]]
    /// Reads `query`'s rows where they may lag the latest commits by up to a second: a read
    /// replica when one is configured and current (docs/scaling.md, "Read replicas"). Only for
    /// reads that need not see the caller's own writes.
    func rowsThatMayLag(_ query: SharedStatement) async throws -> [SharedRow]
    /// Runs `statements` in one transaction and returns the rows of each, in order; once it has
    /// committed, every process's live streams hear of `change` (as the store's own writes tell them).
    func results(of statements: [SharedStatement], announcing change: StoreChange?) async throws -> [[SharedRow]]
    /// The column that orders a table's rows as they were inserted, for a statement's `ORDER
    /// BY`: SQLite's implicit `rowid`; on PostgreSQL a `seq` identity column, which a table
    /// read this way must have.
    var insertionOrder: String { get }
}

extension SharedSQLDatabase {
    /// With no replica, every read is current.
    public func rowsThatMayLag(_ query: SharedStatement) async throws -> [SharedRow] {
        try await rows(query)
    }

    /// ``results(of:announcing:)``, answering the rows of the last statement.
    public func transaction(_ statements: [SharedStatement], announcing change: StoreChange?) async throws -> [SharedRow] {
        try await results(of: statements, announcing: change).last ?? []
    }

    public func transaction(_ statements: [SharedStatement]) async throws -> [SharedRow] {
        try await transaction(statements, announcing: nil)
    }
}
