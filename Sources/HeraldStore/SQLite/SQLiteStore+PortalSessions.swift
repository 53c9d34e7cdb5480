import Foundation
import GRDB
import HeraldCore

extension SQLiteStore {
    public func createPortalSession(_ session: PortalSessionRecord, at now: Date) async throws {
        try await writer.write { db in
            try db.execute(sql: "DELETE FROM portal_sessions WHERE expires_at <= ?", arguments: [Self.micros(now)])
            try db.execute(
                sql: "INSERT INTO portal_sessions (id_hash, key_id, csrf, expires_at) VALUES (?, ?, ?, ?)",
                arguments: [session.idHash, session.keyID.hex, session.csrf, Self.micros(session.expiresAt)]
            )
        }
    }

    public func portalSession(idHash: String, at now: Date) async throws -> PortalSessionEntry? {
        try await writer.read { db in
            try Row.fetchOne(
                try db.cachedStatement(sql: StoredRecords.portalSessionSQL + " WHERE s.id_hash = ? AND s.expires_at > ? AND k.revoked_at IS NULL"),
                arguments: [idHash, Self.micros(now)]
            ).map(StoredRecords.portalSession)
        }
    }

    public func deletePortalSession(idHash: String) async throws {
        try await writer.write { db in
            try db.execute(sql: "DELETE FROM portal_sessions WHERE id_hash = ?", arguments: [idHash])
        }
    }
}
