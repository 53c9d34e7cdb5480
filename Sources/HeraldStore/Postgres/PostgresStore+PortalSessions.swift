import Foundation
import HeraldCore
import PostgresNIO

extension PostgresStore {
    public func createPortalSession(_ record: PortalSessionRecord, at now: Date) async throws {
        try await transaction { session in
            try await session.execute("DELETE FROM portal_sessions WHERE expires_at <= \(Self.micros(now))")
            try await session.execute(
                """
                INSERT INTO portal_sessions (id_hash, key_id, csrf, expires_at)
                VALUES (\(record.idHash), \(record.keyID.hex), \(record.csrf), \(Self.micros(record.expiresAt)))
                """
            )
        }
    }

    public func portalSession(idHash: String, at now: Date) async throws -> PortalSessionEntry? {
        try await withConnection { session in
            var query = PostgresQuery(unsafeSQL: StoredRecords.portalSessionSQL + " WHERE s.id_hash = $1 AND s.expires_at > $2 AND k.revoked_at IS NULL")
            query.binds.append(idHash)
            query.binds.append(Self.micros(now))
            return try await session.row(query).map(StoredRecords.portalSession)
        }
    }

    public func deletePortalSession(idHash: String) async throws {
        try await withConnection { session in try await session.execute("DELETE FROM portal_sessions WHERE id_hash = \(idHash)") }
    }
}
