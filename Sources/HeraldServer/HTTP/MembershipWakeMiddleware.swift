import HeraldCore
import Hummingbird

/// Wakes the topic-membership worker after a request that may have changed who belongs in a
/// provider-side topic: a device registered or removed, a subscription made or left, the
/// hierarchy changed (API or portal), a user erased (their tokens leave FCM's topics). The
/// worker reads the difference from storage, so a wake too many costs one query and a missed
/// one waits for its next scheduled look.
struct MembershipWakeMiddleware: RouterMiddleware {
    typealias Context = HeraldRequestContext

    let worker: TopicMembershipWorker
    static let prefixes = ["/api/notifications/register", "/api/notifications/subscriptions/", "/area/", "/subject/", "/portal/", "/api/users/"]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let response = try await next(request, context)
        if request.method != .get, request.method != .head, (200..<300).contains(response.status.code),
            Self.prefixes.contains(where: { request.uri.path.hasPrefix($0) })
        {
            worker.wake()
        }
        return response
    }
}
