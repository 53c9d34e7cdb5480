import Hummingbird
import NIOCore

/// Asks for a body held back behind `Expect: 100-continue` only when the route reads it: the
/// request's body is wrapped so that its first read sends ``HTTP1RequestRules/ContinueWanted``
/// down the connection's pipeline, where the `100 Continue` is written. A request refused before
/// then (by ``AuthMiddleware``, or a route that checks the announced length or the media type
/// first) is answered without the client sending a byte of its body.
package struct ExpectContinueMiddleware: RouterMiddleware {
    package init() {}
    package typealias Context = HeraldRequestContext

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // Rare: the common request costs one scan of its header names.
        guard request.headers[.expect] != nil else { return try await next(request, context) }
        var request = request
        request.body = RequestBody(asyncSequence: AskingFirst(body: request.body, channel: context.channel))
        return try await next(request, context)
    }

    /// A body whose first read asks the client for it.
    package struct AskingFirst: AsyncSequence, Sendable {
        package typealias Element = ByteBuffer
        package let body: RequestBody
        package let channel: any Channel

        package struct AsyncIterator: AsyncIteratorProtocol {
            package var base: RequestBody.AsyncIterator
            package var channel: (any Channel)?

            package mutating func next() async throws -> ByteBuffer? {
                if let channel {
                    self.channel = nil
                    channel.triggerUserOutboundEvent(HTTP1RequestRules.ContinueWanted(), promise: nil)
                }
                return try await base.next()
            }
        }

        package func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: body.makeAsyncIterator(), channel: channel) }
    }
}
