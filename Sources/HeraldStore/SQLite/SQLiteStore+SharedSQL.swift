import Foundation
import GRDB
public import HeraldCore

extension SQLiteStore: SharedSQLDatabase {
    public func rows(_ query: SharedStatement) async throws -> [SharedRow] {
        try await writer.read { db in try Self.run(query, db) }
    }

    public func rows(of queries: [SharedStatement]) async throws -> [[SharedRow]] {
        try await writer.read { db in try queries.map { try Self.run($0, db) } }
    }

    public var insertionOrder: String { "rowid" }

    public func results(of statements: [SharedStatement], announcing change: StoreChange?) async throws -> [[SharedRow]] {
        let rows = try await writer.write { db in
            try statements.map { try Self.run($0, db) }
        }
        if let change { changes.send(change) }
        return rows
    }

    static func run(_ statement: SharedStatement, _ db: Database) throws -> [SharedRow] {
        let arguments = StatementArguments(
            statement.values.map { value -> (any DatabaseValueConvertible)? in
                switch value {
                case .text(let text): text
                case .integer(let number): number
                }
            })
        return try Row.fetchAll(try db.cachedStatement(sql: statement.text), arguments: arguments).map { row in
            var columns: [String: SharedStatement.Value] = [:]
            for (column, value) in row {
                switch value.storage {
                case .int64(let number): columns[column] = .integer(number)
                case .string(let text): columns[column] = .text(text)
                case .null: columns[column] = .text(nil)
                case .double(let number): columns[column] = .text(String(number))
                case .blob(let data): columns[column] = .text(String(decoding: data, as: UTF8.self))
                }
            }
            return SharedRow(columns: columns)
        }
    }
}
