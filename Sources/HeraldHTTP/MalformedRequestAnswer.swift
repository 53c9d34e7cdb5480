import Foundation
import HTTPTypes
import HeraldCore
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// Puts Herald's JSON error body, and the status that names the fault, in the answer to a
/// request the HTTP/1.1 parser refuses (a request line and headers over the decoder's limits,
/// a malformed request line or header, a bad length or chunk size). Hummingbird answers those
/// with a bare 400 and no body (`Connection: close`, `Content-Length: 0`), which is not the
/// error shape every other refusal has (openapi.yaml) and says nothing of what was wrong.
///
/// The parser's error still goes on to Hummingbird, which answers and closes the connection as
/// before, between requests or after the response in progress: this handler only rewrites
/// that bare 400 once it has seen the error, or drops it when the error was in the body of a
/// request already answered (its route did not read the body), closing the connection. A route
/// reading the body gets the error itself, and ``ErrorMiddleware`` answers it.
package final class MalformedRequestAnswer: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPRequestPart
    package typealias InboundOut = HTTPRequestPart
    package typealias OutboundIn = HTTPResponsePart
    package typealias OutboundOut = HTTPResponsePart

    /// The parser's error, once it has stopped: no request can follow it on this connection.
    private var refusal: HTTPParserError?
    /// Why, when a handler ahead of it refused the request for a fault NIO has no error of its
    /// own for (``HTTP1RequestRules``).
    private var explanation: String?
    /// Counts each refusal (`herald_http_refused_total`), as no route sees these requests.
    private let metrics: HeraldMetrics?
    private var progress = RequestProgress()
    /// Whether the parser's error came inside the latest request's body.
    private var refusedInBody = false
    /// Set while Hummingbird's bare 400 is being dropped: the parser refused the body of a
    /// request its route had already answered without reading it (a 401, a 404). There is no
    /// request left to answer, and a second answer would be read as the answer to the
    /// client's next request; the connection is closed instead.
    private var discarding = false

    package init(metrics: HeraldMetrics? = nil) {
        self.metrics = metrics
    }

    /// The message for the refusal about to be reported (a 400 `malformed_request`).
    package func explain(_ message: String) {
        if refusal == nil, explanation == nil { explanation = message }
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        progress.read(unwrapInboundIn(data))
        context.fireChannelRead(data)
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? HTTPParserError, refusal == nil {
            refusal = error
            refusedInBody = progress.bodyComing
        }
        context.fireErrorCaught(error)
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let part = unwrapOutboundIn(data)
        if discarding {
            promise?.succeed()
            if case .end = part { context.close(promise: nil) }
            return
        }
        if case .end = part { progress.responseEnded() }
        guard let refusal, case .head(let head) = part, Self.isBareRefusal(head) else {
            context.write(data, promise: promise)
            return
        }
        if refusedInBody, progress.unanswered == 0 {
            discarding = true
            promise?.succeed()
            return
        }
        let (status, code, message) = explanation.map { (.badRequest, "malformed_request", $0) } ?? Self.answer(to: refusal)
        metrics?.httpRefused(code: code)
        let answer = ErrorBody.closingAnswer(status: status, code: code, message: message)
        context.write(wrapOutboundOut(.head(answer.head)), promise: nil)
        context.write(wrapOutboundOut(.body(answer.body)), promise: promise)
    }

    /// Hummingbird's answer to a parser error: 400, no body, the connection closing.
    package static func isBareRefusal(_ head: HTTPResponse) -> Bool {
        head.status == .badRequest && head.headerFields[.contentLength] == "0" && head.headerFields[.connection] == "close"
            && head.headerFields[.contentType] == nil
    }

    package static func answer(to error: HTTPParserError) -> (HTTPResponse.Status, String, String) {
        switch error {
        case .headerOverflow:
            return (
                .init(code: 431, reasonPhrase: "Request Header Fields Too Large"), "request_head_too_large",
                "the request line and headers must be at most 80 KiB, in at most 1000 fields"
            )
        case .invalidHost:
            return (
                .badRequest, "invalid_host",
                "the request must have one Host header naming a valid host (HTTP/1.1 requests must have it)"
            )
        case .invalidURL, .invalidPort, .invalidPath, .invalidQueryString, .invalidFragment:
            return (.badRequest, "invalid_url", "the request line's target is not a valid URL")
        case .invalidMethod:
            // Not 501, which RFC 9110 §9.1 suggests for a method the server does not know: the
            // parser reports a well-formed unknown method (`FOO`) and bytes that are no request
            // at all (TLS sent to the plain port) alike.
            return (
                .badRequest, "malformed_request",
                "the request line's method is not one Herald knows (its routes take GET, HEAD, POST, PUT, PATCH and DELETE)"
            )
        case .invalidVersion:
            return (.badRequest, "malformed_request", "the request line must end with HTTP/1.0 or HTTP/1.1")
        case .invalidHeaderToken, .invalidCharactersUsed:
            return (.badRequest, "malformed_request", "a header's name or value holds characters HTTP does not allow")
        case .invalidContentLength, .unexpectedContentLength:
            return (.badRequest, "malformed_request", "the Content-Length header is not a single valid length")
        case .invalidChunkSize:
            return (.badRequest, "malformed_request", "the chunked body has an invalid chunk size")
        case .invalidEOFState:
            return (.badRequest, "malformed_request", "the connection ended before the request did")
        default:
            return (.badRequest, "malformed_request", "the request is not valid HTTP/1.1")
        }
    }
}
