import Foundation
import HeraldCore

/// A Google service-account key file, used as it is: `project_id`, `client_email`,
/// `private_key` (PEM) and `token_uri`.
public struct ServiceAccount: Codable, Sendable, Equatable {
    /// `service_account` in a key file from the Firebase console.
    public var type: String?
    /// The Firebase project messages are sent for.
    public var projectID: String
    /// The key's id, sent as the JWT's `kid`.
    public var privateKeyID: String?
    /// The PEM private key that signs token requests.
    public var privateKey: String
    /// The account's address (the JWT's `iss`).
    public var clientEmail: String
    /// Where access tokens are asked for.
    public var tokenURI: String

    enum CodingKeys: String, CodingKey {
        case type
        case projectID = "project_id"
        case privateKeyID = "private_key_id"
        case privateKey = "private_key"
        case clientEmail = "client_email"
        case tokenURI = "token_uri"
    }

    /// An account from its fields (tests, emulators); a key file is read with ``load(path:)``.
    public init(projectID: String, privateKeyID: String?, privateKey: String, clientEmail: String, tokenURI: String) {
        self.type = "service_account"
        self.projectID = projectID
        self.privateKeyID = privateKeyID
        self.privateKey = privateKey
        self.clientEmail = clientEmail
        self.tokenURI = tokenURI
    }

    /// Reads and checks a service-account JSON file.
    /// - Throws: ``FCMError`` saying which file and which field is wrong.
    public static func load(path: String) throws -> ServiceAccount {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw FCMError.configuration("cannot read fcm.credentials '\(path)': \(error.localizedDescription)")
        }
        let account: ServiceAccount
        do {
            account = try JSONDecoder().decode(ServiceAccount.self, from: data)
        } catch DecodingError.keyNotFound(let key, _) {
            throw FCMError.configuration(
                "fcm.credentials '\(path)' has no '\(key.stringValue)': use the service-account JSON key file from the Firebase console")
        } catch {
            throw FCMError.configuration("fcm.credentials '\(path)' is not a service-account JSON file")
        }
        if let problem = HTTPURL.problem(account.tokenURI) {
            throw FCMError.configuration("fcm.credentials '\(path)': token_uri '\(account.tokenURI)' \(problem)")
        }
        guard !account.projectID.isEmpty, !account.clientEmail.isEmpty else {
            throw FCMError.configuration("fcm.credentials '\(path)': project_id and client_email must not be empty")
        }
        return account
    }
}

/// What went wrong talking to FCM or its token endpoint.
public struct FCMError: Error, Sendable, CustomStringConvertible {
    /// What failed: the configuration, a token request, or the connection.
    public enum Kind: Sendable { case configuration, tokenRequest, transport }
    /// Which part failed.
    public var kind: Kind
    public var description: String

    static func configuration(_ text: String) -> FCMError { FCMError(kind: .configuration, description: text) }
    static func tokenRequest(_ text: String) -> FCMError { FCMError(kind: .tokenRequest, description: text) }
}
