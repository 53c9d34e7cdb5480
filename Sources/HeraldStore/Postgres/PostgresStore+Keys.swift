import Foundation
import HeraldCore
import PostgresNIO

extension PostgresStore {
    public func createKey(_ key: APIKeyRecord, secretHash: String) async throws {
        try await withConnection { session in
            try await session.execute(
                """
                INSERT INTO api_keys (id, name, role, secret_hash, created_at, revoked_at)
                VALUES (\(key.id.hex), \(key.name), \(key.role.rawValue), \(secretHash), \(Self.micros(key.createdAt)), \(key.revokedAt.map(Self.micros)))
                """
            )
        }
    }

    public func ensureKey(_ key: APIKeyRecord, secretHash: String) async throws -> APIKeyRecord {
        try await transaction { session in
            try await session.execute(
                """
                INSERT INTO api_keys (id, name, role, secret_hash, created_at, revoked_at)
                VALUES (\(key.id.hex), \(key.name), \(key.role.rawValue), \(secretHash), \(Self.micros(key.createdAt)), \(key.revokedAt.map(Self.micros)))
                ON CONFLICT (secret_hash) DO NOTHING
                """
            )
            guard let row = try await session.row("SELECT * FROM api_keys WHERE secret_hash = \(secretHash)") else {
                throw HeraldError(.internal, code: "storage_error", "api key vanished while storing it")
            }
            return try StoredRecords.apiKey(row)
        }
    }

    public func key(secretHash: String) async throws -> APIKeyRecord? {
        try await withConnection { session in
            try await session.row("SELECT * FROM api_keys WHERE secret_hash = \(secretHash) AND revoked_at IS NULL").map(StoredRecords.apiKey)
        }
    }

    public func keys() async throws -> [APIKeyRecord] {
        try await withConnection { session in try await session.rows("SELECT * FROM api_keys ORDER BY id").map(StoredRecords.apiKey) }
    }

    public func revokeKey(id: ObjectID, at date: Date) async throws -> Bool {
        try await withConnection { session in
            try await session.count("UPDATE api_keys SET revoked_at = \(Self.micros(date)) WHERE id = \(id.hex) AND revoked_at IS NULL RETURNING id") > 0
        }
    }
}
