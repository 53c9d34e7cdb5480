import Foundation
import GRDB
import HeraldCore

extension SQLiteStore {
    public func createKey(_ key: APIKeyRecord, secretHash: String) async throws {
        try await writer.write { db in
            try db.execute(
                sql: "INSERT INTO api_keys (id, name, role, secret_hash, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [key.id.hex, key.name, key.role.rawValue, secretHash, Self.micros(key.createdAt), key.revokedAt.map(Self.micros)]
            )
        }
    }

    public func ensureKey(_ key: APIKeyRecord, secretHash: String) async throws -> APIKeyRecord {
        try await writer.write { db in
            try db.execute(
                sql: "INSERT OR IGNORE INTO api_keys (id, name, role, secret_hash, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [key.id.hex, key.name, key.role.rawValue, secretHash, Self.micros(key.createdAt), key.revokedAt.map(Self.micros)]
            )
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM api_keys WHERE secret_hash = ?", arguments: [secretHash]) else {
                throw HeraldError(.internal, code: "storage_error", "api key vanished while storing it")
            }
            return try StoredRecords.apiKey(row)
        }
    }

    public func key(secretHash: String) async throws -> APIKeyRecord? {
        try await writer.read { db in
            try Row.fetchOne(try db.cachedStatement(sql: "SELECT * FROM api_keys WHERE secret_hash = ? AND revoked_at IS NULL"), arguments: [secretHash])
                .map(StoredRecords.apiKey)
        }
    }

    public func keys() async throws -> [APIKeyRecord] {
        try await writer.read { db in
            try Row.fetchAll(try db.cachedStatement(sql: "SELECT * FROM api_keys ORDER BY id")).map(StoredRecords.apiKey)
        }
    }

    public func revokeKey(id: ObjectID, at date: Date) async throws -> Bool {
        try await writer.write { db in
            try db.execute(sql: "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", arguments: [Self.micros(date), id.hex])
            return db.changesCount > 0
        }
    }
}
