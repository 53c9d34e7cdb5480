import Hummingbird

/// A 429 (`rate_limited`) whose `Retry-After` says when to try again: every per-client,
/// per-user and per-key limit answers this way.
enum RateLimitedAnswer {
    static func response(wait: Int, _ message: String) -> Response {
        var response = ErrorMiddleware<HeraldRequestContext>.response(status: .tooManyRequests, code: "rate_limited", message: message)
        response.headers[.retryAfter] = String(wait)
        return response
    }
}
