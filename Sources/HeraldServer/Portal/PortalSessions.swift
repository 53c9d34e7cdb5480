import Crypto
import Foundation
import HeraldCore
import HeraldStore

/// A logged-in portal user: the API key they logged in with (never its secret), and the
/// token every form must carry back (CSRF).
struct PortalSession: Sendable {
    var id: String
    var keyName: String
    var role: Role
    var csrf: String
    var expires: Date

    var isAdmin: Bool { role == .admin }
}

/// Portal sessions, kept in storage so every Herald process behind a load balancer knows them
/// and a restart signs nobody out. Only a hash of each session id is stored, and a session ends
/// when its API key is revoked.
struct PortalSessions: Sendable {
    static let cookie = "herald_session"
    static let loginCookie = "herald_login_csrf"
    static let lifetime: TimeInterval = 8 * 3600

    let store: any PortalSessionStore

    func create(for key: APIKeyRecord, now: Date = Date()) async throws -> PortalSession {
        let id = Self.randomToken()
        let record = PortalSessionRecord(idHash: Self.hash(id), keyID: key.id, csrf: Self.randomToken(), expiresAt: now.addingTimeInterval(Self.lifetime))
        try await store.createPortalSession(record, at: now)
        return PortalSession(id: id, keyName: key.name, role: key.role, csrf: record.csrf, expires: record.expiresAt)
    }

    func session(id: String, now: Date = Date()) async throws -> PortalSession? {
        guard id.utf8.count == 64, let entry = try await store.portalSession(idHash: Self.hash(id), at: now) else { return nil }
        return PortalSession(id: id, keyName: entry.key.name, role: entry.key.role, csrf: entry.session.csrf, expires: entry.session.expiresAt)
    }

    func end(id: String) async throws {
        try await store.deletePortalSession(idHash: Self.hash(id))
    }

    static func hash(_ id: String) -> String {
        Hex.lowercase(SHA256.hash(data: Data(id.utf8)))
    }

    /// 256 random bits as hex.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return Hex.lowercase((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// Compares tokens without leaking where they differ through timing.
    static func sameToken(_ a: String, _ b: String) -> Bool {
        let left = Array(a.utf8)
        let right = Array(b.utf8)
        guard left.count == right.count, !left.isEmpty else { return false }
        return zip(left, right).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
