import Foundation
import HeraldCore
import PostgresNIO

extension PostgresStore: UserCredentialStore {
    public func tokensEndedBefore(userID: String) async throws -> Date? {
        try await withConnection { session in
            try await session.row("SELECT not_before FROM token_floors WHERE user_id = \(userID)")?.date("not_before")
        }
    }

    public func endTokens(userID: String, issuedBefore date: Date) async throws {
        try await withConnection { session in try await Self.endTokens(session, userID: userID, issuedBefore: date) }
    }

    static func endTokens(_ session: PostgresSession, userID: String, issuedBefore date: Date) async throws {
        try await session.execute(
            """
            INSERT INTO token_floors (user_id, not_before) VALUES (\(userID), \(micros(date)))
            ON CONFLICT (user_id) DO UPDATE SET \(unescaped: UserCredentialSQL.laterFloor)
            """)
    }

    public func deviceSecretHash(userID: String) async throws -> String? {
        try await withConnection { session in
            try await session.row("SELECT secret_hash FROM device_secrets WHERE user_id = \(userID)")?.text("secret_hash")
        }
    }

    public func claimDeviceSecret(userID: String, secretHash: String, at date: Date) async throws -> Bool {
        try await withConnection { session in
            try await session.count(
                """
                INSERT INTO device_secrets (user_id, secret_hash, created_at) VALUES (\(userID), \(secretHash), \(Self.micros(date)))
                ON CONFLICT (user_id) DO NOTHING RETURNING user_id
                """) > 0
        }
    }

    public func holdsData(userID: String) async throws -> Bool {
        try await withConnection { session in
            // One parameter, named in each table's test.
            var binds = PostgresBindings()
            binds.append(userID)
            return try await session.row(PostgresQuery(unsafeSQL: UserCredentialSQL.holdsData(placeholder: { _ in "$1" }), binds: binds)) != nil
        }
    }

    public func deviceSecretsSince() async throws -> Date? {
        try await withConnection { session in
            try await session.row("SELECT value FROM herald_facts WHERE name = \(UserCredentialSQL.secretsSince)")?.date("value")
        }
    }
}
