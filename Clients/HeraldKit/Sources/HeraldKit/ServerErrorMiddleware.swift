import Foundation
import HTTPTypes
import OpenAPIRuntime

/// Turns every error answer into ``HeraldKitError/server(status:code:message:retryAfter:)``
/// from Herald's error body (`{"error": {"code", "message"}}`), so the facade handles success
/// alone and apps switch on Herald's codes rather than on each operation's generated cases.
struct ServerErrorMiddleware: ClientMiddleware {
    /// Error bodies are small; a larger one is not Herald's.
    static let maxErrorBody = 64 * 1024

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        let (response, responseBody) = try await next(request, body, baseURL)
        guard response.status.code >= 400 else { return (response, responseBody) }
        var code = "http_\(response.status.code)"
        var message = response.status.reasonPhrase
        if let responseBody, let data = try? await Data(collecting: responseBody, upTo: Self.maxErrorBody),
            let decoded = try? JSONDecoder().decode(ErrorBody.self, from: data)
        {
            code = decoded.error.code
            message = decoded.error.message
        }
        let retryAfter = response.headerFields[.retryAfter].flatMap { Int($0) }
        throw HeraldKitError.server(status: response.status.code, code: code, message: message, retryAfter: retryAfter)
    }

    private struct ErrorBody: Decodable {
        struct Detail: Decodable {
            var code: String
            var message: String
        }
        var error: Detail
    }
}

extension HeraldKitError {
    /// The error a generated call's failure stands for: the middleware's own, unwrapped from the
    /// runtime's `ClientError`, or no answer.
    static func from(_ error: any Error) -> HeraldKitError {
        if let error = error as? HeraldKitError { return error }
        if let error = error as? ClientError {
            if let underlying = error.underlyingError as? HeraldKitError { return underlying }
            if error.response != nil { return .unexpectedAnswer(error.causeDescription) }
            return .unreachable(String(describing: error.underlyingError))
        }
        return .unreachable(String(describing: error))
    }
}

/// Runs a generated call and throws only ``HeraldKitError``.
func calling<T: Sendable>(_ call: sending () async throws -> T) async throws(HeraldKitError) -> T {
    do {
        return try await call()
    } catch {
        throw HeraldKitError.from(error)
    }
}
