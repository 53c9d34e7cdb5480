import Foundation
import HTTPTypes
import HeraldCore
import Hummingbird
import NIOCore
import NIOHTTPTypes

/// How long a client may take to send a request. An idle timeout does not bound it, as every
/// trickled byte resets one: that is how slow clients hold connections open (slow-loris on the
/// head, slow POST on the body) until none is left for anyone else.
package struct RequestDeadlineLimits: Sendable {
    package init(head: TimeAmount, body: TimeAmount, bodyMinimumRate: Int) {
        (self.head, self.body, self.bodyMinimumRate) = (head, body, bodyMinimumRate)
    }
    /// The head must be complete this long after the connection opens, and after the first
    /// bytes of each later request (between requests, the idle timeout applies).
    package var head: TimeAmount
    /// The body must be complete this long after its head, plus a second for each
    /// `bodyMinimumRate` bytes it has sent: a large upload at a fair rate always fits, a
    /// trickle never does.
    package var body: TimeAmount
    /// Bytes a second a body must average, past ``body``, to keep its connection.
    package var bodyMinimumRate: Int
}

/// Holds each request to ``RequestDeadlineLimits``. A late head closes the connection (counted
/// as `herald_http_refused_total{code="request_head_timeout"}` once any of it has come: a
/// connection that sent nothing is not a refused request); a late body is answered 408 (unless
/// its response has started) and closes it. Registers each
/// connection with ``OpenConnections`` while it is open, for the end of a graceful shutdown.
package final class RequestDeadlines: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPRequestPart
    package typealias InboundOut = HTTPRequestPart
    package typealias OutboundIn = HTTPResponsePart
    package typealias OutboundOut = HTTPResponsePart

    private let limits: RequestDeadlineLimits
    /// When the connection started waiting for a head; nil while a request is in progress.
    private var waitingSince: NIODeadline?
    /// Whether bytes of the head being waited for have arrived.
    private var headStarted = false
    /// Set after a response until the next bytes arrive: the connection is idle, which the
    /// idle timeout (`server.idle_timeout`) bounds. The head deadline ran from the response,
    /// so every kept-alive connection closed after `request_head_timeout` (10 s), whatever
    /// `idle_timeout` (60 s) said.
    private var idle = false
    /// A pipelined request is in progress from its head, read before the response ahead of it
    /// ends: the bytes of its body that come later do not start a head deadline.
    private var progress = RequestProgress()
    /// When the body being read began, and how much of it has come; nil when none is read.
    private var bodySince: NIODeadline?
    private var bodyBytes = 0
    /// Whether the oldest request's response has started (a 408 would then be a second one).
    private var answering = false
    /// Set once this handler has answered 408: the route's own answer, which comes later, is
    /// not written.
    private var answeredTimeout = false
    /// At most one per connection, and not re-created per request: when it fires it acts if a
    /// deadline is over, or schedules itself for the earliest one still running.
    private var timer: Scheduled<Void>?
    private var timerDue: NIODeadline?
    private let connections: OpenConnections?
    private let metrics: HeraldMetrics?

    package init(limits: RequestDeadlineLimits, connections: OpenConnections? = nil, metrics: HeraldMetrics? = nil) {
        self.limits = limits
        self.connections = connections
        self.metrics = metrics
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        connections?.add(context.channel)
        if context.channel.isActive { waitForHead(context) }
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        connections?.remove(context.channel)
        timer?.cancel()
        timer = nil
        timerDue = nil
    }

    package func channelInactive(context: ChannelHandlerContext) {
        connections?.remove(context.channel)
        context.fireChannelInactive()
    }

    package func channelActive(context: ChannelHandlerContext) {
        waitForHead(context)
        context.fireChannelActive()
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        progress.read(part)
        switch part {
        case .head:
            idle = false
            waitingSince = nil
            bodySince = .now()
            bodyBytes = 0
            ensureTimer(context)
        case .body(let buffer):
            bodyBytes += buffer.readableBytes
        case .end:
            bodySince = nil
        }
        context.fireChannelRead(data)
    }

    /// Bytes arrived, whether or not the decoder has made a part of them yet: the first after a
    /// response start the next head's deadline, unless they are the rest of a body answered
    /// before it was read (the body deadline holds those).
    package func channelReadComplete(context: ChannelHandlerContext) {
        if idle, bodySince == nil {
            idle = false
            waitForHead(context)
        }
        if waitingSince != nil { headStarted = true }
        context.fireChannelReadComplete()
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !answeredTimeout else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        switch unwrapOutboundIn(data) {
        case .head(let head) where head.status.kind != .informational:
            answering = true
        case .end:
            // The response is complete: the connection is idle until the next request's bytes,
            // unless the next request's head has been read already (pipelined).
            progress.responseEnded()
            answering = false
            waitingSince = nil
            idle = progress.unanswered == 0
        default:
            break
        }
        context.write(data, promise: promise)
    }

    private func waitForHead(_ context: ChannelHandlerContext) {
        waitingSince = .now()
        headStarted = false
        ensureTimer(context)
    }

    /// The earliest deadline running, and whether it is the body's.
    private var due: (at: NIODeadline, body: Bool)? {
        let head = waitingSince.map { ($0 + limits.head, false) }
        let body = bodySince.map { since in
            let allowance = TimeAmount.seconds(Int64(bodyBytes / max(1, limits.bodyMinimumRate)))
            return (since + limits.body + allowance, true)
        }
        guard let head, let body else { return head ?? body }
        return body.0 < head.0 ? body : head
    }

    /// Schedules the timer unless it fires before the earliest deadline anyway (it is then
    /// rescheduled when it fires, so a request costs no timer of its own).
    private func ensureTimer(_ context: ChannelHandlerContext) {
        guard let due else { return }
        if let timerDue, timer != nil, timerDue <= due.at { return }
        timer?.cancel()
        schedule(context, at: due.at)
    }

    private func schedule(_ context: ChannelHandlerContext, at due: NIODeadline) {
        timerDue = due
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: due) {
            let (handler, context) = bound.value
            handler.expire(context)
        }
    }

    private func expire(_ context: ChannelHandlerContext) {
        timer = nil
        timerDue = nil
        guard let due else { return }
        guard NIODeadline.now() >= due.at else {
            schedule(context, at: due.at)
            return
        }
        waitingSince = nil
        bodySince = nil
        // A 408 answers the request whose body is late only when no response is ahead of it.
        guard due.body, !answering, progress.unanswered <= 1 else {
            if !due.body, headStarted { metrics?.httpRefused(code: "request_head_timeout") }
            context.close(promise: nil)
            return
        }
        answering = true
        let answer = ErrorBody.closingAnswer(
            status: .init(code: 408, reasonPhrase: "Request Timeout"), code: "request_timeout",
            message:
                "the request body did not arrive in time (\(limits.body.nanoseconds / 1_000_000_000) s, plus a second per \(limits.bodyMinimumRate) bytes sent)"
        )
        answeredTimeout = true
        // The route reading the body gets this rather than the end of the connection (a parser
        // error, a 400), so its answer, its request log line and its metrics say 408 as the
        // client was told; that answer goes no further than this handler. Before the writes:
        // the close after them can come at once, and the first error is the one the route sees.
        context.fireErrorCaught(RequestBodyTimeout())
        context.write(wrapOutboundOut(.head(answer.head)), promise: nil)
        context.write(wrapOutboundOut(.body(answer.body)), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}

/// The body of a request did not arrive within its deadline (``RequestDeadlines`` has answered 408).
package struct RequestBodyTimeout: HTTPResponseError {
    package var status: HTTPResponse.Status { .init(code: 408, reasonPhrase: "Request Timeout") }

    package func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(status: status)
    }
}
