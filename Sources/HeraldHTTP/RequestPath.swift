/// A request's path as Hummingbird's router reads it: split at `/`, empty segments dropped, no
/// percent-decoding, so `//portal/send` and `/portal//send` are served as `/portal/send`.
/// A middleware that decides by the path before routing must read it the same way, or a second
/// slash routes a request to a handler the middleware took it not to be for.
package enum RequestPath {
    package static func segments(_ path: some StringProtocol) -> [Substring] {
        Substring(path).split(separator: "/", omittingEmptySubsequences: true)
    }

    /// Whether the router would take `path` to a route under `prefix` (segments, `["api", "users"]`).
    package static func path(_ path: some StringProtocol, isUnder prefix: [Substring]) -> Bool {
        segments(path).starts(with: prefix)
    }
}
