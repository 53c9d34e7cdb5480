import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Closes a connection whose client does not finish a request head in time: after the
/// connection opens, and after each response, the next head must arrive within `deadline`.
/// Trickled bytes do not extend it (an idle timeout would be reset by every byte), which is
/// what keeps slow-loris clients from holding connections open.
final class RequestHeadDeadline: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let deadline: TimeAmount
    private var timer: Scheduled<Void>?
    /// Where the connection is registered while open, for the end of a graceful shutdown.
    private let connections: OpenConnections?

    init(deadline: TimeAmount, connections: OpenConnections? = nil) {
        self.deadline = deadline
        self.connections = connections
    }

    func handlerAdded(context: ChannelHandlerContext) {
        connections?.add(context.channel)
        if context.channel.isActive { arm(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        connections?.remove(context.channel)
        timer?.cancel()
        timer = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        connections?.remove(context.channel)
        context.fireChannelInactive()
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data) {
            timer?.cancel()
            timer = nil
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // The response is complete: the clock runs for the next request on this connection.
        if case .end = unwrapOutboundIn(data) { arm(context) }
        context.write(data, promise: promise)
    }

    private func arm(_ context: ChannelHandlerContext) {
        timer?.cancel()
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: deadline) {
            bound.value.close(promise: nil)
        }
    }
}
