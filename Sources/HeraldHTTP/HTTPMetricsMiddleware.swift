import HeraldCore
import Hummingbird

/// Counts requests by method, matched route (the pattern, not the path, so ids do not explode
/// the label set) and status. Runs outside ``ErrorMiddleware`` so errors count with the status
/// the client saw.
package struct HTTPMetricsMiddleware: RouterMiddleware {
    package init(metrics: HeraldMetrics) { self.metrics = metrics }
    package typealias Context = HeraldRequestContext

    package let metrics: HeraldMetrics

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let route = context.endpointPath ?? "unmatched"
        do {
            let response = try await next(request, context)
            metrics.httpRequest(method: request.method.rawValue, route: route, status: response.status.code)
            return response
        } catch {
            metrics.httpRequest(method: request.method.rawValue, route: route, status: RequestLogMiddleware.status(of: error))
            throw error
        }
    }
}
