import HTTPTypes
public import HeraldCore
public import Hummingbird
import NIOCore

/// Who is calling: an API key with its role, or a user holding a user token.
public enum Caller: Sendable, Equatable {
    case apiKey(APIKeyRecord)
    case user(String)

    /// A user token (from the user's backend or `POST /api/auth/device`), not an API key.
    public var isUserToken: Bool {
        if case .user = self { return true }
        return false
    }
}

/// Request-scoped state: the authenticated caller, set by ``AuthMiddleware``.
public struct HeraldRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public var caller: Caller?
    /// The user or device token the caller holds, when it holds one: what a live stream checks
    /// again at each heartbeat.
    public var userToken: UserToken?
    /// The device a device token was issued to (`POST /api/auth/device`), when the caller holds one.
    public var deviceID: String? { userToken?.deviceID }
    /// The connection, for ``remoteAddress`` (read when asked, as few routes need it: reading
    /// the address takes the channel's lock) and ``ExpectContinueMiddleware``.
    package let channel: any NIOCore.Channel
    /// What a handler wants on the request's log line (the notification id, say); shared with
    /// ``RequestLogMiddleware``, which writes the line after the response.
    package let logFields = RequestLogFields()

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.caller = nil
        self.userToken = nil
        self.channel = source.channel
    }

    /// The client's socket address, for per-address limits (``SignUpLimiter/client(_:)``).
    package var remoteAddress: SocketAddress? { channel.remoteAddress }

    /// Bodies over 64 KiB are refused with 413 (openapi.yaml).
    public var maxUploadSize: Int { JSONBody.maxBytes }
}

extension HeraldRequestContext {
    /// The caller's key, which must have one of `roles`.
    package func requireKey(_ roles: Set<Role>) throws -> APIKeyRecord {
        switch caller {
        case .none:
            throw HeraldError(.unauthorized, code: "missing_credentials", "send 'Authorization: Bearer <api key>'")
        case .user:
            throw HeraldError(.forbidden, code: "forbidden", "a user token cannot call this endpoint; use an API key with role \(Self.names(roles))")
        case .apiKey(let key):
            guard roles.contains(key.role) else {
                throw HeraldError(
                    .forbidden, code: "forbidden", "this endpoint needs an API key with role \(Self.names(roles)); this key is '\(key.role.rawValue)'")
            }
            return key
        }
    }

    /// The user the request acts for: a user token's subject, or `X-User-ID` with a backend
    /// or admin key. A user token reaches only its own user.
    package func actingUser(_ request: Request) throws -> String {
        let header = try request.headers.text(.xUserID)
        switch caller {
        case .none:
            throw HeraldError(.unauthorized, code: "missing_credentials", "send 'Authorization: Bearer <user token or api key>'")
        case .user(let userID):
            if let header, !UserID.same(header, userID) {
                throw HeraldError(.forbidden, code: "forbidden", "a user token can only act for its own user")
            }
            return userID
        case .apiKey(let key):
            guard key.role == .backend || key.role == .admin else {
                throw HeraldError(.forbidden, code: "forbidden", "acting for a user needs a 'backend' or 'admin' key; this key is '\(key.role.rawValue)'")
            }
            guard let header else {
                throw HeraldError(.badRequest, code: "missing_user_id", "send the user to act for in the 'X-User-ID' header")
            }
            try UserID.validate(header, field: "X-User-ID")
            return header
        }
    }

    private static func names(_ roles: Set<Role>) -> String {
        roles.map { "'\($0.rawValue)'" }.sorted().joined(separator: " or ")
    }
}

extension HTTPField.Name {
    package static let xUserID = Self("X-User-ID")!
    package static let xForwardedFor = Self("X-Forwarded-For")!
    package static let lastEventID = Self("Last-Event-ID")!
    /// Tells nginx not to buffer an answer (a live stream).
    package static let xAccelBuffering = Self("X-Accel-Buffering")!
}
