import HTTPTypes
import HeraldCore
import Hummingbird
import NIOCore

/// Cross-origin requests from browser apps (`server.cors_origins`), answered by Hummingbird's
/// `CORSMiddleware`.
///
/// A web app on another origin than Herald's registers its Web Push subscription, reads the pull
/// feed and its history, and pulls cards from the browser with a user token. Without CORS the
/// browser's preflight (`OPTIONS`, as `Authorization` and a JSON body make a request "not
/// simple") was answered 405 and the app could reach none of it. Only the listed origins are
/// answered, or every origin with `*`; never `null` (sandboxed frames and files share it).
/// Credentials (cookies) are not allowed: the API takes bearer tokens, and the portal, which
/// uses a cookie, is same-origin only and gets no CORS headers.
package struct CrossOriginRequests<Context: RequestContext>: RouterMiddleware {
    /// The headers a browser app may send: its token, a JSON body, and the conditional and
    /// resuming headers of the feed, cards and the live stream. Not `X-User-ID`, which goes with
    /// API keys, and those belong on servers.
    package static var allowedHeaders: [HTTPField.Name] {
        [.accept, .authorization, .contentType, .ifNoneMatch, HTTPField.Name("Last-Event-ID"), HTTPField.Name("Idempotency-Key")].compactMap { $0 }
    }

    private let anyOrigin: CORSMiddleware<Context>?
    private let byOrigin: [String: CORSMiddleware<Context>]

    /// - Parameter origins: `*`, or origins as browsers send them (`https://app.example`,
    ///   `http://localhost:3000`), already checked by ``problem(_:)``.
    package init(origins: [String]) {
        func middleware(_ allow: CORSMiddleware<Context>.AllowOriginExtended) -> CORSMiddleware<Context> {
            CORSMiddleware(
                allowOrigin: allow, allowHeaders: Self.allowedHeaders, allowMethods: [.get, .head, .post, .put, .delete],
                exposedHeaders: ["ETag", "Retry-After", "Idempotent-Replayed"], maxAge: .seconds(600))
        }
        anyOrigin = origins.contains("*") ? middleware(.all) : nil
        byOrigin = Dictionary(origins.filter { $0 != "*" }.map { ($0, middleware(.oneOf($0))) }, uniquingKeysWith: { first, _ in first })
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let origin = request.headers[.origin], !RequestPath.path(request.uri.path, isUnder: ["portal"]),
            let cors = byOrigin[origin] ?? (origin == "null" ? nil : anyOrigin)
        else { return try await next(request, context) }
        return try await cors.handle(request, context: context, next: next)
    }

    /// What is wrong with `entry` as a `server.cors_origins` entry, or nil: an origin is a scheme
    /// (http or https), a host and an optional port, with nothing after them, as a browser sends it.
    package static func problem(_ entry: String) -> String? {
        if entry == "*" { return nil }
        guard let (authority, rest) = HTTPURL.httpAuthority(of: entry) else {
            return
                "'\(entry)' is not '*' or an origin such as https://app.example (\(entry == "null" ? "null is shared by every sandboxed frame and file" : "a scheme, http or https"))"
        }
        guard !authority.isEmpty, rest.isEmpty, !authority.contains(where: { "@ ".contains($0) }) else {
            return "'\(entry)' is not an origin such as https://app.example (a scheme, a host and an optional port, nothing after them)"
        }
        guard entry == entry.lowercased() else { return "'\(entry)' must be written in lower case, as browsers send origins" }
        return nil
    }
}
