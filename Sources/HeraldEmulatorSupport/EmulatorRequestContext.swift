public import Hummingbird
import NIOCore

/// The request context emulators route with: Hummingbird's basic one, plus which HTTP version the
/// request came over, so an emulator can check a client speaks what the real provider requires.
/// An HTTP/1.1 request's channel is the connection, a child of the listening socket; an HTTP/2
/// request's channel is a stream, a child of the connection.
public struct EmulatorRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// "2" for a request on an HTTP/2 stream, "1.1" otherwise.
    public let httpVersion: String
    /// The TCP connection the request came over (an HTTP/2 stream's parent channel), so an
    /// emulator can count the connections a client opens.
    public let connection: ObjectIdentifier
    /// The request's own channel: the connection over HTTP/1.1, the stream over HTTP/2. Closing
    /// it drops this request with no answer and no other (a fault mode): closing an HTTP/2
    /// connection would also lose the answers of its other streams, sent twice when retried.
    public let requestChannel: any Channel

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        let stream = source.channel.parent?.parent != nil
        httpVersion = stream ? "2" : "1.1"
        let channel = stream ? source.channel.parent ?? source.channel : source.channel
        connection = ObjectIdentifier(channel)
        requestChannel = source.channel
    }
}
