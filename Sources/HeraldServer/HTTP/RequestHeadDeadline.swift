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
    /// When the connection started waiting for a head; nil while a request is in progress.
    private var waitingSince: NIODeadline?
    /// At most one per connection, and not re-created per request: when it fires it closes the
    /// connection if the wait is over, or schedules itself for the current wait's end.
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
        if case .head = unwrapInboundIn(data) { waitingSince = nil }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // The response is complete: the clock runs for the next request on this connection.
        if case .end = unwrapOutboundIn(data) { arm(context) }
        context.write(data, promise: promise)
    }

    private func arm(_ context: ChannelHandlerContext) {
        let now = NIODeadline.now()
        waitingSince = now
        if timer == nil { schedule(context, at: now + deadline) }
    }

    private func schedule(_ context: ChannelHandlerContext, at due: NIODeadline) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: due) {
            let (handler, context) = bound.value
            handler.expire(context)
        }
    }

    private func expire(_ context: ChannelHandlerContext) {
        timer = nil
        guard let since = waitingSince else { return }
        let due = since + deadline
        if NIODeadline.now() >= due {
            context.close(promise: nil)
        } else {
            schedule(context, at: due)
        }
    }
}
