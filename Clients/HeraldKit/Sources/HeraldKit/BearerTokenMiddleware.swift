import Foundation
import HTTPTypes
import OpenAPIRuntime

/// Adds the device's bearer token to every call that needs one, renewing it first when it is
/// about to expire (``Session``).
struct BearerTokenMiddleware: ClientMiddleware {
    /// Operations Herald answers without credentials.
    static let anonymous: Set<String> = ["authDevice", "feedIndex", "listChannels"]

    let session: Session

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        guard !Self.anonymous.contains(operationID) else { return try await next(request, body, baseURL) }
        var request = request
        request.headerFields[.authorization] = "Bearer \(try await session.validToken())"
        return try await next(request, body, baseURL)
    }
}
