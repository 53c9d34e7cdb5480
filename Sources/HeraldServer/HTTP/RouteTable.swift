import Hummingbird
import Synchronization

/// Registers routes on a Hummingbird router and remembers each (method, path), so the
/// OpenAPI document can be checked against what is actually served.
public final class RouteTable: Sendable {
    public struct Route: Sendable, Hashable, CustomStringConvertible {
        public var method: String
        public var path: String
        public var description: String { "\(method) \(path)" }
    }

    private let recorded = Mutex<[Route]>([])

    public init() {}

    public var routes: [Route] { recorded.withLock { $0 } }

    func add(
        _ router: Router<HeraldRequestContext>, _ method: HTTPRequest.Method, _ path: String,
        _ handler: @escaping @Sendable (Request, HeraldRequestContext) async throws -> Response
    ) {
        router.on(RouterPath(path), method: method) { request, context in try await handler(request, context) }
        recorded.withLock { $0.append(Route(method: method.rawValue, path: path)) }
    }
}
