public import Foundation
public import HeraldCore

/// Everything the server stores: Herald's storage plus the web portal's sessions and what
/// guards users' tokens.
public typealias ServerStorage = HeraldStorage & PortalSessionStore & UserCredentialStore & SharedSQLDatabase & EngineBackedStorage

/// Message Hub portal sessions, shared by every Herald process on the database.
public protocol PortalSessionStore: Sendable {
    /// Stores a new session, and removes the ones that expired by `now`.
    func createPortalSession(_ session: PortalSessionRecord, at now: Date) async throws
    /// The session with this id hash, unless it expired by `now` or its API key was revoked.
    func portalSession(idHash: String, at now: Date) async throws -> PortalSessionEntry?
    func deletePortalSession(idHash: String) async throws
}

/// A portal session as stored: only a hash of its id, so the table cannot be replayed.
public struct PortalSessionRecord: Sendable, Equatable {
    public var idHash: String
    public var keyID: ObjectID
    /// The token every form of this session carries back.
    public var csrf: String
    public var expiresAt: Date

    public init(idHash: String, keyID: ObjectID, csrf: String, expiresAt: Date) {
        self.idHash = idHash
        self.keyID = keyID
        self.csrf = csrf
        self.expiresAt = expiresAt
    }
}

/// A live portal session with the API key it was opened with.
public struct PortalSessionEntry: Sendable, Equatable {
    public var session: PortalSessionRecord
    public var key: APIKeyRecord

    public init(session: PortalSessionRecord, key: APIKeyRecord) {
        self.session = session
        self.key = key
    }
}
