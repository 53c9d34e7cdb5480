import NIOCore
import NIOHTTP1

/// Added with Hummingbird's additional handlers (after its codec, where they all go); puts the
/// handlers that must see requests as NIO's HTTP/1 decoder reads them (``HostHeaderCheck``,
/// ``CloseAfterResponse``, ``ContinueAnswer``, in that order) right after the decoder, ahead of Hummingbird's codec, and removes itself.
final class AfterDecoderInstaller: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Any

    func handlerAdded(context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        if let decoder = try? pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self) {
            // Each goes right after the decoder: the last added is nearest it.
            try? pipeline.addHandler(ContinueAnswer(), position: .after(decoder))
            try? pipeline.addHandler(CloseAfterResponse(), position: .after(decoder))
            try? pipeline.addHandler(HostHeaderCheck(), position: .after(decoder))
        }
        pipeline.removeHandler(context: context, promise: nil)
    }
}
