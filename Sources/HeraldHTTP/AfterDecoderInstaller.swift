import NIOCore
import NIOHTTP1

/// Added with Hummingbird's additional handlers (after its codec, where they all go); puts
/// ``HTTP1RequestRules``, which must see requests as NIO's HTTP/1 decoder reads them, right
/// after the decoder, ahead of Hummingbird's codec, and removes itself.
package final class AfterDecoderInstaller: ChannelInboundHandler, RemovableChannelHandler {
    package init() {}
    package typealias InboundIn = Any

    package func handlerAdded(context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        if let decoder = try? pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self) {
            try? pipeline.addHandler(HTTP1RequestRules(), position: .after(decoder))
        }
        pipeline.removeHandler(context: context, promise: nil)
    }
}
