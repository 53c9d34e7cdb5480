import NIOCore
import NIOPosix

/// A loopback server that answers any request with fixed bytes and closes the connection:
/// answers no HTTP server library would send, from no server task that could stop mid-write.
public struct RawAnswerServer {
    let channel: any Channel

    public var url: String { "http://127.0.0.1:\(channel.localAddress?.port ?? 0)/" }

    /// - Parameter closes: whether the connection is closed after the answer (or left open, the
    ///   rest of a body it announces never coming).
    public static func start(_ answer: String, closes: Bool = true) async throws -> RawAnswerServer {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Answerer(answer: answer, closes: closes)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return RawAnswerServer(channel: channel)
    }

    public func stop() async throws {
        try await channel.close()
    }

    private final class Answerer: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let answer: String
        let closes: Bool
        var answered = false

        init(answer: String, closes: Bool) {
            self.answer = answer
            self.closes = closes
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !answered else { return }
            answered = true
            // Closed once every byte is out, so a long answer is there to be read in full.
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            let closes = self.closes
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: answer))).whenComplete { _ in if closes { bound.value.close(promise: nil) } }
        }
    }
}
