public import Hummingbird
public import NIOCore

/// The request context emulators route with: Hummingbird's basic one, plus which HTTP version the
/// request came over (HTTP/2 streams are child channels of their connection), so an emulator can
/// check a client speaks what the real provider requires.
public struct EmulatorRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// "2" for a request on an HTTP/2 stream, "1.1" otherwise.
    public let httpVersion: String

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        httpVersion = source.channel.parent == nil ? "1.1" : "2"
    }
}
