import Hummingbird
import Synchronization

/// Registers routes on a Hummingbird router and remembers each (method, path): the documented
/// ones so the OpenAPI document can be checked against what is actually served, and all of them
/// so a known path asked with another method is answered 405 with `Allow` rather than 404.
public final class RouteTable: Sendable {
    public struct Route: Sendable, Hashable, CustomStringConvertible {
        public var method: String
        public var path: String
        public var description: String { "\(method) \(path)" }
    }

    private struct Entry {
        var route: Route
        var documented: Bool
        /// The path's segments, `nil` for a `{parameter}`.
        var segments: [Substring?]
    }

    private let recorded = Mutex<[Entry]>([])

    public init() {}

    /// The routes openapi.yaml describes.
    public var routes: [Route] { recorded.withLock { $0.filter(\.documented).map(\.route) } }

    package func add(
        _ router: Router<HeraldRequestContext>, _ method: HTTPRequest.Method, _ path: String, documented: Bool = true,
        _ handler: @escaping @Sendable (Request, HeraldRequestContext) async throws -> Response
    ) {
        router.on(RouterPath(path), method: method) { request, context in try await handler(request, context) }
        let segments = RequestPath.segments(path).map { $0.hasPrefix("{") ? nil : $0 }
        recorded.withLock { $0.append(Entry(route: Route(method: method.rawValue, path: path), documented: documented, segments: segments)) }
    }

    /// The methods served on the route that would answer `path` (HEAD wherever GET, as the
    /// router generates it), sorted; empty when no route
    /// matches it. Like the router's trie, a literal segment is preferred to a parameter at
    /// each position, so the answer is the method list of the one route shape the router picks.
    package func methods(servedAt path: Substring) -> [String] {
        let asked = RequestPath.segments(path)
        let candidates = recorded.withLock { entries in
            entries.filter { entry in
                entry.segments.count == asked.count
                    && zip(entry.segments, asked).allSatisfy { pattern, segment in pattern.map { $0 == segment } ?? true }
            }
        }
        // The most literal shape: compare positions left to right, a literal beating a parameter.
        guard let best = candidates.map({ $0.segments.map { $0 != nil } }).max(by: { $0.lexicographicallyPrecedes($1) { !$0 && $1 } })
        else { return [] }
        var methods = Set(candidates.filter { $0.segments.map { $0 != nil } == best }.map(\.route.method))
        if methods.contains(HTTPRequest.Method.get.rawValue) { methods.insert(HTTPRequest.Method.head.rawValue) }
        return methods.sorted()
    }
}
