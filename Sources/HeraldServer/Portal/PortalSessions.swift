import Crypto
import Foundation
import HeraldCore
import Synchronization

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

/// Portal sessions, in this process's memory: a restart logs everyone out, and behind a load
/// balancer with several Herald processes the portal needs sticky sessions.
final class PortalSessions: Sendable {
    static let cookie = "herald_session"
    static let loginCookie = "herald_login_csrf"
    static let lifetime: TimeInterval = 8 * 3600

    private let sessions = Mutex<[String: PortalSession]>([:])
    private let capacity = 10_000

    func create(for key: APIKeyRecord, now: Date = Date()) -> PortalSession {
        let session = PortalSession(id: Self.randomToken(), keyName: key.name, role: key.role, csrf: Self.randomToken(), expires: now.addingTimeInterval(Self.lifetime))
        sessions.withLock { sessions in
            if sessions.count >= capacity { sessions = sessions.filter { $0.value.expires > now } }
            sessions[session.id] = session
        }
        return session
    }

    func session(id: String, now: Date = Date()) -> PortalSession? {
        sessions.withLock { sessions in
            guard let session = sessions[id] else { return nil }
            guard session.expires > now else {
                sessions.removeValue(forKey: id)
                return nil
            }
            return session
        }
    }

    func end(id: String) {
        sessions.withLock { _ = $0.removeValue(forKey: id) }
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
