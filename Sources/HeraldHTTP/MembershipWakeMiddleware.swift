import HeraldCore
import Hummingbird

/// Wakes the topic-membership worker after a request that may have changed who belongs in a
/// provider-side topic: a device registered or removed, a subscription made or left, the
/// hierarchy changed (API or portal), a user erased (their tokens leave FCM's topics). The
/// worker reads the difference from storage, so a wake too many costs one query and a missed
/// one waits for its next scheduled look.
package struct MembershipWakeMiddleware: RouterMiddleware {
    package init(wake: @escaping @Sendable () -> Void) { self.wake = wake }
    package typealias Context = HeraldRequestContext

    /// Wakes the worker (TopicMembershipWorker, the topics module's).
    package let wake: @Sendable () -> Void
    /// As the router reads paths (``RequestPath``): `//api/users/x` is served, so it wakes too.
    package static let prefixes: [[Substring]] = [
        ["api", "notifications", "register"], ["api", "notifications", "subscriptions"], ["area"], ["subject"], ["portal"], ["api", "users"],
    ]

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let response = try await next(request, context)
        if Self.wakes(after: request.method, request.uri.path, status: response.status.code) { wake() }
        return response
    }

    /// Whether a request so answered may have changed a topic's members: a change that succeeded.
    package static func wakes(after method: HTTPRequest.Method, _ path: String, status: Int) -> Bool {
        method != .get && method != .head && (200..<300).contains(status) && prefixes.contains { RequestPath.path(path, isUnder: $0) }
    }
}
