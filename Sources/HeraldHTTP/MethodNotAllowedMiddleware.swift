import Hummingbird

/// Turns the router's 404 for a path it serves with other methods into 405 with `Allow`
/// (RFC 9110 §15.5.6), so a client learns the method is wrong, not the path.
///
/// Written for ``HeraldRequestContext`` rather than any context: a middleware generic over its
/// context runs unspecialized when the server (another module) instantiates it, on every request.
package struct MethodNotAllowedMiddleware: RouterMiddleware {
    package typealias Context = HeraldRequestContext
    package init(routes: RouteTable) { self.routes = routes }
    package let routes: RouteTable

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            let allowed = routes.methods(servedAt: request.uri.path[...])
            guard !allowed.isEmpty, !allowed.contains(request.method.rawValue) else { throw error }
            var response = ErrorAnswer.response(
                status: .methodNotAllowed, code: "method_not_allowed",
                message: "\(request.uri.path) accepts \(allowed.joined(separator: ", ")), not \(request.method.rawValue)")
            response.headers[.allow] = allowed.joined(separator: ", ")
            return response
        }
    }
}
