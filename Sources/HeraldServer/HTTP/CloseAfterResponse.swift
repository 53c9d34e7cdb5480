import NIOCore
import NIOHTTP1

/// Closes the connection after the response to a request that did not ask to keep it: an
/// HTTP/1.0 request without `Connection: keep-alive` (RFC 9112 §9.3), or any with
/// `Connection: close`, and says so in the response's `Connection` header. An HTTP/1.0 request
/// that asked to keep the connection is told it is kept (`Connection: keep-alive`), as HTTP/1.0
/// clients read a response without it to the end of the connection. Hummingbird drops the
/// request's version before Herald's handlers see it and kept every connection open, so an
/// HTTP/1.0 client that reads to the end of the connection (`ab`, `check_http`, many probes)
/// waited for the request head deadline after every request.
///
/// A `CONNECT` request's connection ends after the response too: Herald tunnels nothing, and
/// NIO's encoder writes a response to `CONNECT` with no body and no framing (RFC 9112 §6.3),
/// so its client reads to the end of the connection, which stayed open until the deadline.
///
/// It has to see the requests as NIO's HTTP/1 decoder reads them, ahead of Hummingbird's codec,
/// where added handlers do not go: ``AfterDecoderInstaller``, added with them, puts it there.
final class CloseAfterResponse: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// For each request read and not yet answered, in order: whether it wants its connection
    /// kept, and whether it is HTTP/1.0.
    private var requests: [(keepAlive: Bool, http10: Bool)] = []
    /// Whether the response being written ends the connection.
    private var closing = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) {
            requests.append((head.isKeepAlive && head.method != .CONNECT, head.version == .http1_0))
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where head.status.code >= 200:
            guard !requests.isEmpty else { break }
            let request = requests.removeFirst()
            closing = !request.keepAlive
            if closing || request.http10 {
                head.headers.replaceOrAdd(name: "Connection", value: closing ? "close" : "keep-alive")
                context.write(wrapOutboundOut(.head(head)), promise: promise)
                return
            }
        case .end where closing:
            closing = false
            let channel = context.channel
            let written = promise ?? context.eventLoop.makePromise()
            written.futureResult.whenComplete { _ in channel.close(promise: nil) }
            context.write(data, promise: written)
            return
        default:
            break
        }
        context.write(data, promise: promise)
    }
}
