public import Foundation

/// Roles an API key can have (openapi.yaml).
public enum Role: String, Sendable, Codable, CaseIterable {
    /// Everything.
    case admin
    /// Topic messages, read the hierarchy.
    case communicator
    /// Send notifications, act for users.
    case backend

    /// The role as the Message Hub apps name it in a message's `sender`.
    public var words: String {
        switch self {
        case .admin: "Super User"
        case .communicator: "Communicator"
        case .backend: "Backend"
        }
    }

    /// A Message Hub archive's `sender`: the role in words and the key's name,
    /// `Communicator (comms-team)`.
    public func sender(keyName: String) -> String {
        "\(words) (\(keyName))"
    }
}

/// An API key as stored and listed (`herald keys list`): never its secret, only its hash.
public struct APIKeyRecord: Sendable, Equatable {
    /// The key's id, as `herald keys list` shows it and `herald keys revoke` takes it.
    public var id: ObjectID
    /// The operator's name for it.
    public var name: String
    /// What it may do.
    public var role: Role
    /// When it was created.
    public var createdAt: Date
    /// When it was revoked; nil while it works.
    public var revokedAt: Date?

    /// A record as stored.
    public init(id: ObjectID, name: String, role: Role, createdAt: Date, revokedAt: Date? = nil) {
        self.id = id
        self.name = name
        self.role = role
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}
