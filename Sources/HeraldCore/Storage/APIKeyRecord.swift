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

public struct APIKeyRecord: Sendable, Equatable {
    public var id: ObjectID
    public var name: String
    public var role: Role
    public var createdAt: Date
    public var revokedAt: Date?

    public init(id: ObjectID, name: String, role: Role, createdAt: Date, revokedAt: Date? = nil) {
        self.id = id
        self.name = name
        self.role = role
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}
