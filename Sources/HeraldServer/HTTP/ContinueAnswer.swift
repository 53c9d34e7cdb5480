import NIOCore
import NIOHTTP1

/// Answers `Expect: 100-continue` with `100 Continue` once the request's head is read, as RFC
/// 9110 §10.1.1 requires of a server that does not answer at once. Hummingbird sends no 100, so
/// a client that waits for it before sending its body waited out its own timeout on every such
/// request: a second for curl, which asks for bodies over 1 MiB (NDJSON score uploads).
///
/// A 100 belongs to the request being answered, so for a request pipelined behind others it is
/// sent once their responses are complete, never in the middle of one. An HTTP/1.0 request's
/// expectation is ignored (§10.1.1), as is one on a request without a body.
final class ContinueAnswer: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// For each request read and not yet answered in full, in order: whether it still waits for a 100.
    private var unanswered: CircularBuffer<Bool> = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) {
            unanswered.append(Self.waitsForContinue(head))
            if unanswered.count == 1 { sendContinueIfWaiting(context: context) }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head) where head.status.code >= 200 && !unanswered.isEmpty:
            // A final answer: the request's body is no longer waited for.
            unanswered[unanswered.startIndex] = false
            context.write(data, promise: promise)
        case .end where !unanswered.isEmpty:
            context.write(data, promise: promise)
            unanswered.removeFirst()
            sendContinueIfWaiting(context: context)
        default:
            context.write(data, promise: promise)
        }
    }

    private func sendContinueIfWaiting(context: ChannelHandlerContext) {
        guard let first = unanswered.first, first else { return }
        unanswered[unanswered.startIndex] = false
        context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .continue))), promise: nil)
    }

    /// HTTP/1.1 or later, a body announced, and `100-continue` among the expectations.
    static func waitsForContinue(_ head: HTTPRequestHead) -> Bool {
        // Rare, so asked first: a scan of the names, nothing allocated.
        guard head.headers.contains(name: "expect") else { return false }
        guard head.version.major > 1 || (head.version.major == 1 && head.version.minor >= 1) else { return false }
        let hasBody = head.headers.contains(name: "transfer-encoding") || head.headers["content-length"].contains { $0 != "0" }
        guard hasBody else { return false }
        return head.headers["expect"].contains { value in
            value.split(separator: ",").contains { $0.trimmingOptionalWhitespace.lowercased() == "100-continue" }
        }
    }
}
