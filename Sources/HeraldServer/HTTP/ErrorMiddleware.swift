import Foundation
import HeraldCore
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
            var response = Self.response(status: Self.status(error.kind), code: error.code, message: error.message)
            // Unavailable is temporary (storage away, the commit queue full): say when to retry.
            if error.kind == .unavailable { response.headers[.retryAfter] = "1" }
            return response
        } catch let error as HTTPParserError {
            // The body did not parse as HTTP (a bad chunk size, the connection ending early):
            // the client's fault, and the connection cannot be read further.
            context.logger.info("request refused by the HTTP parser: \(error)")
            let (status, code, message) = MalformedRequestAnswer.answer(to: error)
            var response = Self.response(status: status, code: code, message: message)
            response.headers[.connection] = "close"
            return response
        } catch let error as any HTTPResponseError {
            let (code, message) = Self.describe(error.status)
            return Self.response(status: error.status, code: code, message: message)
        } catch {
            if let unavailable = StorageFailure.unavailable(error) {
                context.logger.warning("storage unavailable: \(error)")
                var response = Self.response(status: .serviceUnavailable, code: unavailable.code, message: unavailable.message)
                response.headers[.retryAfter] = "1"
                return response
            }
            context.logger.error("unhandled error: \(error)")
            return Self.response(status: .internalServerError, code: "internal", message: "an unexpected error occurred; it has been logged")
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

    static func status(_ kind: HeraldError.Kind) -> HTTPResponse.Status {
        switch kind {
        case .badRequest: .badRequest
        case .unauthorized: .unauthorized
        case .forbidden: .forbidden
        case .notFound: .notFound
        case .conflict: .conflict
        case .payloadTooLarge: .contentTooLarge
        case .unsupportedMediaType: .unsupportedMediaType
        case .unprocessable: .unprocessableContent
        case .unavailable: .serviceUnavailable
        case .internal: .internalServerError
        }
    }

    static func describe(_ status: HTTPResponse.Status) -> (String, String) {
        switch status {
        case .notFound: ("not_found", "no such route")
        case .methodNotAllowed: ("method_not_allowed", "this route does not accept that method")
        case .contentTooLarge: (JSONBody.tooLarge.code, JSONBody.tooLarge.message)
        case .badRequest: ("bad_request", "the request is malformed")
        case .unsupportedMediaType: ("unsupported_media_type", "send the body as 'Content-Type: application/json'")
        case .requestTimeout: ("request_timeout", "the request body did not arrive in time")
        default: (status.reasonPhrase.lowercased().replacingOccurrences(of: " ", with: "_"), status.reasonPhrase)
        }
    }

    static func response(status: HTTPResponse.Status, code: String, message: String) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: ErrorBody.json(code: code, message: message))))
    }
}

/// `{"error":{"code":"snake_case_code","message":"human sentence"}}`
struct ErrorBody: Codable {
    struct Detail: Codable {
        var code: String
        var message: String
    }
    var error: Detail

    /// `{"error":{"code":…,"message":…}}` as bytes.
    static func json(code: String, message: String) -> Data {
        (try? JSONBody.encoder().encode(ErrorBody(error: .init(code: code, message: message)))) ?? Data()
    }

    /// An error answer a channel handler writes itself, outside the router (a request the
    /// parser refused, a body too slow): its head, which closes the connection, and its body.
    static func closingAnswer(status: HTTPResponse.Status, code: String, message: String) -> (head: HTTPResponse, body: ByteBuffer) {
        let body = ByteBuffer(bytes: json(code: code, message: message))
        var fields = HTTPFields()
        fields[.contentType] = "application/json; charset=utf-8"
        fields[.contentLength] = String(body.readableBytes)
        fields[.connection] = "close"
        return (HTTPResponse(status: status, headerFields: fields), body)
    }
}
