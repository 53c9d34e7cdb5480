import Foundation
import HeraldCore
import Hummingbird
import Logging
import Synchronization

/// One structured line per request, written when the response is ready: method, route,
/// status, duration, the request id (Hummingbird's `hb.request.id`), the caller's key id and
/// whatever the handler added (`notification_id`). Never headers or bodies, so no credential
/// reaches the log.
package struct RequestLogMiddleware: RouterMiddleware {
    package init() {}
    package typealias Context = HeraldRequestContext

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        do {
            let response = try await next(request, context)
            log(request, context: context, status: response.status.code, started: started)
            return response
        } catch {
            log(request, context: context, status: Self.status(of: error), started: started)
            throw error
        }
    }

    /// The status a client sees for an error that got past ``ErrorMiddleware``.
    package static func status(of error: any Error) -> Int {
        (error as? any HTTPResponseError)?.status.code ?? 500
    }

    private func log(_ request: Request, context: Context, status: Int, started: ContinuousClock.Instant) {
        let level: Logger.Level = status >= 500 ? .error : .info
        // Building the fields costs more than the request on fast paths (the feed's 304).
        guard context.logger.logLevel <= level else { return }
        let elapsed = ContinuousClock.now - started
        var metadata: Logger.Metadata = [
            "method": "\(request.method.rawValue)", "route": "\(context.endpointPath ?? "unmatched")", "status": "\(status)",
            "duration_ms": "\(String(format: "%.2f", Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000))",
        ]
        for (key, value) in context.logFields.values { metadata[key] = "\(value)" }
        context.logger.log(level: level, "request", metadata: metadata)
    }
}

/// Fields a handler adds to its request's log line.
package final class RequestLogFields: Sendable {
    private let fields = Mutex<[String: String]>([:])

    package func set(_ key: String, _ value: String) { fields.withLock { $0[key] = value } }

    package var values: [String: String] { fields.withLock { $0 } }
}
