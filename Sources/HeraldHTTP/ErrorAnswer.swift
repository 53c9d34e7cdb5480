import Foundation
import HTTPTypes
import HeraldCore
import Hummingbird
import NIOCore

/// Error answers as every route and middleware writes them: the status for each
/// ``HeraldError`` kind and `{"error":{"code":…,"message":…}}` (openapi.yaml).
package enum ErrorAnswer {
    package static func status(_ kind: HeraldError.Kind) -> HTTPResponse.Status {
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

    package static func describe(_ status: HTTPResponse.Status) -> (String, String) {
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

    package static func response(status: HTTPResponse.Status, code: String, message: String) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: ErrorBody.json(code: code, message: message))))
    }
}

/// `{"error":{"code":"snake_case_code","message":"human sentence"}}`
package struct ErrorBody: Codable {
    package struct Detail: Codable {
        package var code: String
        package var message: String
    }
    package var error: Detail

    /// `{"error":{"code":…,"message":…}}` as bytes.
    package static func json(code: String, message: String) -> Data {
        (try? JSONBody.encoder().encode(ErrorBody(error: .init(code: code, message: message)))) ?? Data()
    }

    /// An error answer a channel handler writes itself, outside the router (a request the
    /// parser refused, a body too slow): its head, which closes the connection, and its body.
    package static func closingAnswer(status: HTTPResponse.Status, code: String, message: String) -> (head: HTTPResponse, body: ByteBuffer) {
        let body = ByteBuffer(bytes: json(code: code, message: message))
        var fields = HTTPFields()
        fields[.contentType] = "application/json; charset=utf-8"
        fields[.contentLength] = String(body.readableBytes)
        fields[.connection] = "close"
        return (HTTPResponse(status: status, headerFields: fields), body)
    }
}
