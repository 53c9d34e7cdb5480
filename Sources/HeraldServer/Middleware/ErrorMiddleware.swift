import Foundation
import HeraldCore
import HeraldHTTP
import HeraldStore
public import Hummingbird
import Logging
import NIOHTTP1

/// Turns every error into `{"error":{"code":…,"message":…}}` with its status (openapi.yaml).
/// Anything unexpected is logged and answered with a 500 that reveals no internals.
public struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    public init() {}

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            // A path or query value with U+0000 could never be stored or looked up as sent
            // (PostgreSQL refuses it): refused here, for every route.
            if Self.hasEncodedNUL(request.uri.string) {
                throw HeraldError(.badRequest, code: "invalid_url", "the URL must not contain U+0000 (%00)")
            }
            if let refusal = ContentCoding.refusal(for: request) { return refusal }
            return try await next(request, context)
        } catch let error as HeraldError {
            if error.kind == .internal { context.logger.error("internal error: \(error)") }
            var response = ErrorAnswer.response(status: ErrorAnswer.status(error.kind), code: error.code, message: error.message)
            // Unavailable is temporary (storage away, the commit queue full): say when to retry.
            if error.kind == .unavailable { response.headers[.retryAfter] = "1" }
            return response
        } catch let error as HTTPParserError {
            // The body did not parse as HTTP (a bad chunk size, the connection ending early):
            // the client's fault, and the connection cannot be read further.
            context.logger.info("request refused by the HTTP parser: \(error)")
            let (status, code, message) = MalformedRequestAnswer.answer(to: error)
            var response = ErrorAnswer.response(status: status, code: code, message: message)
            response.headers[.connection] = "close"
            return response
        } catch let error as any HTTPResponseError {
            let (code, message) = ErrorAnswer.describe(error.status)
            return ErrorAnswer.response(status: error.status, code: code, message: message)
        } catch {
            if let unavailable = StorageFailure.unavailable(error) {
                context.logger.warning("storage unavailable: \(error)")
                var response = ErrorAnswer.response(status: .serviceUnavailable, code: unavailable.code, message: unavailable.message)
                response.headers[.retryAfter] = "1"
                return response
            }
            context.logger.error("unhandled error: \(error)")
            return ErrorAnswer.response(status: .internalServerError, code: "internal", message: "an unexpected error occurred; it has been logged")
        }
    }

    /// Whether `text` has `%00`, by its bytes: Foundation's `contains` took 2 % of the server's
    /// CPU on the feed's 304 path, for a check every request makes.
    static func hasEncodedNUL(_ text: String) -> Bool {
        var (beforeLast, last): (UInt8, UInt8) = (0, 0)
        for byte in text.utf8 {
            if beforeLast == UInt8(ascii: "%") && last == UInt8(ascii: "0") && byte == UInt8(ascii: "0") { return true }
            (beforeLast, last) = (last, byte)
        }
        return false
    }
}
