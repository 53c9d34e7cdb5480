import Foundation
public import HeraldCore
import PostgresNIO

extension PostgresStore: SharedSQLDatabase {
    public func rows(_ query: SharedStatement) async throws -> [SharedRow] {
        try await withConnection { session in try await Self.run(query, session) }
    }

    public func rowsThatMayLag(_ query: SharedStatement) async throws -> [SharedRow] {
        try await withReadConnection { session in try await Self.run(query, session) }
    }

    public func rows(of queries: [SharedStatement]) async throws -> [[SharedRow]] {
        try await transaction { session in
            // READ COMMITTED, the default, takes a snapshot per statement.
            try await session.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            var rows: [[SharedRow]] = []
            for query in queries { rows.append(try await Self.run(query, session)) }
            return rows
        }
    }

    public var insertionOrder: String { "seq" }

    public func results(of statements: [SharedStatement], announcing change: StoreChange?) async throws -> [[SharedRow]] {
        try await transaction { session in
            var rows: [[SharedRow]] = []
            for statement in statements { rows.append(try await Self.run(statement, session)) }
            if let change { try await session.announce(change) }
            return rows
        }
    }

    static func run(_ statement: SharedStatement, _ session: PostgresSession) async throws -> [SharedRow] {
        var bindings = PostgresBindings(capacity: statement.values.count)
        for value in statement.values {
            switch value {
            case .text(let text): bindings.append(text)
            case .integer(let number): bindings.append(number)
            }
        }
        return try await session.rows(PostgresQuery(unsafeSQL: statement.text, binds: bindings)).map { row in
            var columns: [String: SharedStatement.Value] = [:]
            for cell in row {
                // Both engines keep TEXT and 64-bit integers (StoredRow); a count(*) or an
                // integer column arrives as int8, anything else is read as text.
                if cell.dataType == .int8 || cell.dataType == .int4 || cell.dataType == .int2 {
                    columns[cell.columnName] = .integer(try cell.decode(Int64?.self))
                } else {
                    columns[cell.columnName] = .text(try cell.decode(String?.self))
                }
            }
            return SharedRow(columns: columns)
        }
    }
}
