import Foundation

/// What a HeraldKit call throws: Herald's own refusal (its error code, docs/README's error
/// body), or no answer at all. Calls that work offline (promotion, queued events, the feed's
/// next message) throw neither for want of a network.
public enum HeraldKitError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Herald answered with an error: its HTTP status, its `error.code` (`invalid_field`,
    /// `unauthorized`, `rate_limited`…) and message, and `Retry-After` when it sent one.
    case server(status: Int, code: String, message: String, retryAfter: Int?)
    /// No answer: the server is down or unreachable, or the connection broke.
    case unreachable(String)
    /// The call needs a signed-in device: call ``Herald/signUp()`` or
    /// ``Herald/signIn(userID:proof:)`` first.
    case notSignedIn
    /// A Message Hub subject the operator made Forced cannot be left.
    case locked(topicKey: String)
    /// Herald answered something this version of HeraldKit does not read.
    case unexpectedAnswer(String)
    /// The app passed something Herald would refuse (an event name too long, properties that
    /// are not JSON); nothing was queued or sent.
    case invalidArgument(String)
    /// The local database failed (a full disk, a file another process broke).
    case localStorage(String)

    /// Whether trying again later may succeed: no answer, a rate limit, or a server error.
    public var isTransient: Bool {
        switch self {
        case .unreachable: true
        case .server(let status, _, _, _): status == 408 || status == 429 || status >= 500
        default: false
        }
    }

    /// Herald's error code, when Herald answered with one.
    public var code: String? {
        if case .server(_, let code, _, _) = self { return code }
        return nil
    }

    public var description: String {
        switch self {
        case .server(let status, let code, let message, _): "Herald answered \(status) \(code): \(message)"
        case .unreachable(let reason): "Herald did not answer: \(reason)"
        case .notSignedIn: "not signed in"
        case .locked(let topicKey): "the subject \(topicKey) is Forced and cannot be left"
        case .unexpectedAnswer(let what): "unexpected answer from Herald: \(what)"
        case .invalidArgument(let reason): "invalid argument: \(reason)"
        case .localStorage(let reason): "local database: \(reason)"
        }
    }
}
