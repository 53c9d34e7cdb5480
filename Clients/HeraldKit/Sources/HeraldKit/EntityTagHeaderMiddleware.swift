import Foundation
import HTTPTypes
import OpenAPIRuntime

/// The generated client writes header values URI-encoded, so `If-None-Match: "abc"` left as
/// `%22abc%22`, which no entity tag matches and every conditional fetch came back whole. This
/// puts the tag back as the app's cache sent it.
struct EntityTagHeaderMiddleware: ClientMiddleware {
    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        if let value = request.headerFields[.ifNoneMatch], let decoded = value.removingPercentEncoding { request.headerFields[.ifNoneMatch] = decoded }
        return try await next(request, body, baseURL)
    }
}
