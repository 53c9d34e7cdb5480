import Foundation
import GRDB
import HeraldCore

extension SQLiteStore: UserCredentialStore {
    public func tokensEndedBefore(userID: String) async throws -> Date? {
        try await writer.read { db in
            try Int64.fetchOne(try db.cachedStatement(sql: "SELECT not_before FROM token_floors WHERE user_id = ?"), arguments: [userID])
                .map(Timestamp.date(microseconds:))
        }
    }

    public func endTokens(userID: String, issuedBefore date: Date) async throws {
        try await writer.write { db in try Self.endTokens(db, userID: userID, issuedBefore: date) }
    }

    static func endTokens(_ db: Database, userID: String, issuedBefore date: Date) throws {
        try db.execute(
            sql: "INSERT INTO token_floors (user_id, not_before) VALUES (?, ?) ON CONFLICT (user_id) DO UPDATE SET \(UserCredentialSQL.laterFloor)",
            arguments: [userID, micros(date)])
    }

    public func deviceSecretHash(userID: String) async throws -> String? {
        try await writer.read { db in
            try String.fetchOne(db, sql: "SELECT secret_hash FROM device_secrets WHERE user_id = ?", arguments: [userID])
        }
    }

    public func claimDeviceSecret(userID: String, secretHash: String, at date: Date) async throws -> Bool {
        try await writer.write { db in
            try db.execute(
                sql: "INSERT INTO device_secrets (user_id, secret_hash, created_at) VALUES (?, ?, ?) ON CONFLICT (user_id) DO NOTHING",
                arguments: [userID, secretHash, Self.micros(date)])
            return db.changesCount > 0
        }
    }

    public func holdsData(userID: String) async throws -> Bool {
        try await writer.read { db in
            try Row.fetchOne(db, sql: UserCredentialSQL.holdsData(placeholder: { _ in "?" }), arguments: StatementArguments(Array(repeating: userID, count: 5)))
                != nil
        }
    }

    public func deviceSecretsSince() async throws -> Date? {
        try await writer.read { db in
            try Int64.fetchOne(db, sql: "SELECT value FROM herald_facts WHERE name = ?", arguments: [UserCredentialSQL.secretsSince])
                .map(Timestamp.date(microseconds:))
        }
    }
}
