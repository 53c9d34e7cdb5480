import NIOCore
import NIOHTTP1

/// What HTTP/1.1 asks of a server for each request, as NIO's decoder reads it, that Hummingbird
/// leaves undone. One handler, as all four are decided by the request's head and the order of
/// the responses, and each handler in the pipeline is a hop for every part of every request
/// (three handlers here cost the feed's 304 path about 3 % of its CPU):
///
/// - **`Host`** (RFC 9112 §3.2): a request without exactly one valid `Host` (an HTTP/1.1
///   request without one, two of them, `Host: a.example/path`) is refused as the parser's own
///   faults are, with ``MalformedRequestAnswer``'s JSON body (400 `invalid_host`) once the
///   responses to requests before it are written, and the connection closes: nothing after it
///   is read. Such requests were served, the first of two `Host` values taken as the authority.
/// - **`Expect: 100-continue`** (RFC 9110 §10.1.1) is answered `100 Continue` when the route
///   starts to read the body (``ExpectContinueMiddleware`` sends ``ContinueWanted`` down the
///   pipeline then): Hummingbird sent none, so a client that holds its body back for it waited
///   out its own timeout (a second for curl, which asks for bodies over 1 MiB). A request refused
///   before its body is read (401, 413 by its `Content-Length`, 415) gets its final answer
///   instead and the connection closes after it, as the client may never send the body; so a
///   client is not asked for 100 MiB only to be told that 64 KiB is the limit. No 100 is sent
///   once the client has begun its body without waiting. An HTTP/1.0 request's expectation, or
///   one on a request without a body, is ignored.
/// - **Closing after the response** to a request that did not ask to keep its connection: an
///   HTTP/1.0 request without `Connection: keep-alive` (RFC 9112 §9.3), any with `Connection:
///   close`, and `CONNECT` (Herald tunnels nothing, and NIO writes a response to `CONNECT` with
///   no framing, so its client reads to the end of the connection). The response says so in its
///   `Connection` header, and an HTTP/1.0 request that asked to keep the connection is told
///   `Connection: keep-alive`, as HTTP/1.0 clients read a response without it to the end of the
///   connection. Hummingbird drops the request's version and kept every connection open, so
///   HTTP/1.0 clients (`ab`, `check_http`, many probes) waited for the head deadline. A
///   response of unknown length (a live stream) to an HTTP/1.0 request is sent as HTTP/1.0,
///   unchunked, and ends the connection: it was chunked, which HTTP/1.0 clients cannot read.
///
/// - **A body that cannot be framed**: a `Transfer-Encoding` not ending in `chunked`, or one
///   on an HTTP/1.0 request, is refused as the parser's faults are (400 `malformed_request`)
///   and the connection closes (RFC 9112 §6.1, §6.3). The parser passed the head of the first
///   up before its own error, so the route answered (501) and the parser's 400 followed: two
///   answers to one request. The second was read, its chunked body too, and the connection
///   kept, so a request sent after it was served.
///
/// It goes ahead of Hummingbird's codec, where added handlers do not: ``AfterDecoderInstaller``
/// puts it there.
package final class HTTP1RequestRules: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias InboundOut = HTTPServerRequestPart
    package typealias OutboundIn = HTTPServerResponsePart
    package typealias OutboundOut = HTTPServerResponsePart

    /// A request read and not yet answered in full.
    package struct Unanswered {
        package var keepAlive: Bool
        package var http10: Bool
        /// Whether it still waits for a 100 before sending its body.
        package var waitsForContinue: Bool
    }

    /// Sent down the pipeline (`triggerUserOutboundEvent`) when a route starts to read the body
    /// of the request being answered: a client waiting for `100 Continue` is sent one.
    package struct ContinueWanted {}

    /// In the order they were read.
    private var unanswered: CircularBuffer<Unanswered> = []
    /// Set once a request is refused: nothing after it on the connection is read.
    private var refused = false

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        switch unwrapInboundIn(data) {
        case .body where !unanswered.isEmpty:
            // Part of the request read last: its client did not wait for a 100.
            unanswered[unanswered.index(before: unanswered.endIndex)].waitsForContinue = false
        case .head(let head):
            guard HostHeader.isValid(in: head) else {
                refused = true
                context.fireErrorCaught(HTTPParserError.invalidHost)
                return
            }
            if let problem = Self.framingProblem(head) {
                refused = true
                // NIO has no parser error of its own for this (llhttp's invalid transfer
                // encoding is `.unknown` too): the answer is told why.
                (try? context.pipeline.syncOperations.handler(type: MalformedRequestAnswer.self))?.explain(problem)
                context.fireErrorCaught(HTTPParserError.unknown)
                return
            }
            unanswered.append(
                Unanswered(
                    keepAlive: head.isKeepAlive && head.method != .CONNECT, http10: head.version == .http1_0,
                    waitsForContinue: Self.waitsForContinue(head)))
        default:
            break
        }
        context.fireChannelRead(data)
    }

    package func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard event is ContinueWanted else { return context.triggerUserOutboundEvent(event, promise: promise) }
        // Routes read one request's body at a time, the first one not yet answered.
        if let first = unanswered.first, first.waitsForContinue {
            unanswered[unanswered.startIndex].waitsForContinue = false
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .continue))), promise: nil)
        }
        promise?.succeed()
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where head.status.code >= 200 && !unanswered.isEmpty:
            if unanswered[unanswered.startIndex].waitsForContinue {
                // Answered before its body was asked for: the client may never send it, so what
                // follows on the connection cannot be told from it (RFC 9110 §10.1.1).
                unanswered[unanswered.startIndex].waitsForContinue = false
                unanswered[unanswered.startIndex].keepAlive = false
            }
            if unanswered[unanswered.startIndex].http10, head.status.mayHaveResponseBody, !head.headers.contains(name: "content-length") {
                // HTTP/1.0 has no chunked coding (RFC 9112 §6.1): a body of unknown length (a
                // live stream) ends with the connection, which NIO's encoder frames so for a
                // response it is told is HTTP/1.0.
                head.version = .http1_0
                unanswered[unanswered.startIndex].keepAlive = false
            }
            let request = unanswered[unanswered.startIndex]
            if !request.keepAlive || request.http10 {
                head.headers.replaceOrAdd(name: "Connection", value: request.keepAlive ? "keep-alive" : "close")
                context.write(wrapOutboundOut(.head(head)), promise: promise)
                return
            }
        case .end where !unanswered.isEmpty:
            let request = unanswered.removeFirst()
            guard request.keepAlive else {
                let channel = context.channel
                let written = promise ?? context.eventLoop.makePromise()
                written.futureResult.whenComplete { _ in channel.close(promise: nil) }
                context.write(data, promise: written)
                return
            }
        default:
            break
        }
        context.write(data, promise: promise)
    }

    /// Why a request's body cannot be framed, though the parser let it pass: a
    /// `Transfer-Encoding` whose final coding is not `chunked` (RFC 9112 §6.3: the body's length
    /// cannot be known), or one on an HTTP/1.0 request (§6.1: the framing is to be taken as
    /// faulty and the connection closed after it).
    package static func framingProblem(_ head: HTTPRequestHead) -> String? {
        guard head.headers.contains(name: "transfer-encoding") else { return nil }
        guard Self.isHTTP11OrLater(head) else {
            return "an HTTP/1.0 request cannot have a Transfer-Encoding (RFC 9112 §6.1)"
        }
        guard head.headers["transfer-encoding"].flatMap(\.lowercasedListElements).last == "chunked" else {
            return "a Transfer-Encoding must end with chunked, which frames the body (RFC 9112 §6.3)"
        }
        return nil
    }

    /// Whether the request speaks HTTP/1.1 or later (chunked bodies, expectations).
    package static func isHTTP11OrLater(_ head: HTTPRequestHead) -> Bool {
        head.version.major > 1 || (head.version.major == 1 && head.version.minor >= 1)
    }

    /// HTTP/1.1 or later, a body announced, and `100-continue` among the expectations.
    package static func waitsForContinue(_ head: HTTPRequestHead) -> Bool {
        // Rare, so asked first: a scan of the names, nothing allocated.
        guard head.headers.contains(name: "expect") else { return false }
        guard Self.isHTTP11OrLater(head) else { return false }
        let hasBody = head.headers.contains(name: "transfer-encoding") || head.headers["content-length"].contains { $0 != "0" }
        guard hasBody else { return false }
        return head.headers["expect"].contains { $0.lowercasedListElements.contains("100-continue") }
    }
}
