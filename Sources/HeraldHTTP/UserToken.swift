public import Foundation

/// A user token whose signature and times were checked.
public struct UserToken: Sendable, Equatable {
    /// Who minted it.
    public enum Kind: String, Sendable {
        /// The user's backend, with `user_token_secret`.
        case backend
        /// Herald, at `POST /api/auth/device`: never accepted there as a `proof`.
        case device
    }

    public var userID: String
    public var kind: Kind
    /// Nil when the token has no `iat`.
    public var issuedAt: Date?
    public var expires: Date
    /// The device a device token was issued to.
    public var deviceID: String?

    public init(userID: String, kind: Kind, issuedAt: Date?, expires: Date, deviceID: String?) {
        (self.userID, self.kind, self.issuedAt, self.expires, self.deviceID) = (userID, kind, issuedAt, expires, deviceID)
    }
}
