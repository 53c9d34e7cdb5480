import HTTPTypes
import Hummingbird

/// An error answer whose `Retry-After` says when to try again: by default a 429
/// (`rate_limited`), as every per-client, per-user and per-key limit answers; a full server
/// answers 503 the same way.
package enum RateLimitedAnswer {
    package static func response(
        wait: Int, _ message: String, status: HTTPResponse.Status = .tooManyRequests, code: String = "rate_limited"
    ) -> Response {
        var response = ErrorAnswer.response(status: status, code: code, message: message)
        response.headers[.retryAfter] = String(wait)
        return response
    }
}
