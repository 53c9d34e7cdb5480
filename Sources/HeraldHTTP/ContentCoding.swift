import HTTPTypes
import Hummingbird

/// Refuses a request body sent in a coding Herald does not undo: a content coding
/// (`Content-Encoding: gzip`) is answered 415 with `Accept-Encoding: identity` (RFC 9110
/// §12.5.3), a transfer coding other than `chunked` (`Transfer-Encoding: gzip, chunked`) 501
/// (RFC 9112 §6.1). NIO's parser frames such a body by its final `chunked` and hands on the
/// bytes still coded, so a compressed body was refused as invalid JSON, and a body that was not
/// in fact compressed was accepted and stored as though the headers did not say it was.
/// ``ErrorMiddleware`` asks it of every request (a middleware of its own was a further async
/// call per request, on the feed's 304 path too).
package enum ContentCoding {
    /// The refusal for `request`'s body, or nil when it has none or is plain.
    package static func refusal(for request: Request) -> Response? {
        // Almost every request has neither header: two lookups, nothing allocated.
        guard request.headers[.transferEncoding] != nil || request.headers[.contentEncoding] != nil else { return nil }
        let transferCodings = request.headers[values: .transferEncoding].flatMap(\.lowercasedListElements)
        if let coding = transferCodings.first(where: { $0 != "chunked" }) {
            return ErrorAnswer.response(
                status: .notImplemented, code: "unsupported_transfer_coding",
                message: "Herald reads request bodies in the chunked transfer coding only, not '\(shown(coding))': send the body uncompressed")
        }
        let hasBody = !transferCodings.isEmpty || (request.headers[.contentLength].map { $0 != "0" } ?? false)
        if hasBody, let coding = request.headers[values: .contentEncoding].flatMap(\.lowercasedListElements).first(where: { $0 != "identity" }) {
            var response = ErrorAnswer.response(
                status: .unsupportedMediaType, code: "unsupported_content_encoding",
                message: "Herald reads request bodies without a content coding, not '\(shown(coding))': send the body uncompressed")
            response.headers[.acceptEncoding] = "identity"
            return response
        }
        return nil
    }

    /// A coding as the error message quotes it: a header value can be 80 KiB long.
    package static func shown(_ coding: String) -> String {
        coding.count > 40 ? coding.prefix(40) + "…" : coding
    }
}
