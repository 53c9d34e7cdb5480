/// The one error type the core throws for anything a caller did wrong or that cannot be done now.
///
/// The HTTP layer maps ``Kind`` to a status code and renders
/// `{"error":{"code":…,"message":…}}`; `code` is a stable snake_case string clients may switch on.
public struct HeraldError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, in the terms of an HTTP status.
    public enum Kind: Sendable, Equatable {
        /// The request is malformed (400).
        case badRequest
        /// No or bad credentials (401).
        case unauthorized
        /// Authenticated, but not allowed (403).
        case forbidden
        /// The thing does not exist (404).
        case notFound
        /// The request conflicts with current state (409).
        case conflict
        /// The body is larger than allowed (413).
        case payloadTooLarge
        /// The body is not JSON (415).
        case unsupportedMediaType
        /// Well-formed, but a value is invalid (422).
        case unprocessable
        /// A dependency (storage) is not available (503).
        case unavailable
        /// A bug or an unexpected failure (500). Never used for bad input.
        case `internal`
    }

    /// Decides the HTTP status.
    public var kind: Kind
    /// Stable, snake_case: what clients switch on (`invalid_field`, `not_found`).
    public var code: String
    /// A sentence for a person, naming the field or thing at fault; never a secret.
    public var message: String

    /// An error of `kind`, with its stable `code` and a `message` for a person.
    public init(_ kind: Kind, code: String, _ message: String) {
        self.kind = kind
        self.code = code
        self.message = message
    }

    /// `code: message`, for logs.
    public var description: String { "\(code): \(message)" }

    /// A 422 naming `field` (a JSON path such as `quiet_hours.start`) and what is wrong with it.
    public static func invalidField(_ field: String, _ problem: String) -> HeraldError {
        HeraldError(.unprocessable, code: "invalid_field", "'\(field)' \(problem)")
    }

    /// A 422 for a required `field` that is absent.
    public static func missingField(_ field: String) -> HeraldError {
        HeraldError(.unprocessable, code: "missing_field", "'\(field)' is required")
    }

    /// A 404 for `what` (`notification 65f…`).
    public static func notFound(_ what: String) -> HeraldError {
        HeraldError(.notFound, code: "not_found", "\(what) not found")
    }
}
