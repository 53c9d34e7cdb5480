import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// A loopback server that answers any request with fixed bytes and closes the connection:
/// answers no HTTP server library would send, from no server task that could stop mid-write.
public struct RawAnswerServer {
    let channel: any Channel
    private let accepted: Accepted

    public var url: String { "http://127.0.0.1:\(port)/" }
    public var port: Int { channel.localAddress?.port ?? 0 }
    /// Connections accepted so far.
    public var connections: Int { accepted.count.load(ordering: .relaxed) }

    /// - Parameter closes: whether the connection is closed after the answer (or left open, the
    ///   rest of a body it announces never coming).
    /// - Parameter host: a loopback address to listen on (127.0.0.0/8).
    /// - Parameter tls: serves TLS with this context (a certificate of the test's own).
    public static func start(
        _ answer: String, closes: Bool = true, host: String = "127.0.0.1", port: Int = 0, tls: NIOSSLContext? = nil
    ) async throws -> RawAnswerServer {
        let accepted = Accepted()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                accepted.count.add(1, ordering: .relaxed)
                return channel.eventLoop.makeCompletedFuture {
                    if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls)) }
                    try channel.pipeline.syncOperations.addHandler(Answerer(answer: answer, closes: closes))
                }
            }
            .bind(host: host, port: port).get()
        return RawAnswerServer(channel: channel, accepted: accepted)
    }

    public func stop() async throws {
        try await channel.close()
    }

    private final class Accepted: Sendable {
        let count = Atomic<Int>(0)
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
