public import AsyncHTTPClient
import NIOSSL
import Synchronization

/// The HTTP clients a sink sends through, taken in turn: what every HTTP sink needs of
/// AsyncHTTPClient, in one place.
///
/// - Sized to the sink's concurrency. `HTTPClient.shared` keeps 8 HTTP/1.1 connections per
///   host, which would hold a `max_concurrency` above 8 to 8.
/// - Never following redirects. A sink POSTs what it was given to the address it was given; a
///   redirect would carry the request (and its signature or payload) on to wherever the answer
///   points, an internal address included, or turn a POST into a GET whose 200 counted as
///   delivered. A 3xx is an answer like any other, for the sink to classify.
/// - Several clients over `https`. AsyncHTTPClient multiplexes every request to a host on one
///   HTTP/2 connection, and servers cap the streams on one (FCM and most others at 100): one
///   connection would hold any higher concurrency to that cap, on one event loop. So a sink
///   opens ``connections(forConcurrency:streamsPerConnection:)`` clients and spreads its
///   requests over them. HTTP/1.1 opens a connection per request in flight anyway.
public final class SinkHTTPClients: Sendable {
    /// The first client: for requests outside the sink's main traffic (access tokens).
    public let primary: HTTPClient
    private let clients: [HTTPClient]
    private let owned: Bool
    private let turn = Atomic<Int>(0)

    /// How many clients (HTTP/2 connections per host) a concurrency needs: one per
    /// `streamsPerConnection` of it.
    public static func connections(forConcurrency concurrency: Int, streamsPerConnection: Int = 100) -> Int {
        let streams = max(1, streamsPerConnection)
        return max(1, (max(1, concurrency) + streams - 1) / streams)
    }

    /// One client as described above.
    /// - Parameter caFile: extra certificates (PEM) to trust, for an emulator's; verification
    ///   stays on.
    public static func makeClient(maxConcurrency: Int, trusting caFile: String? = nil) -> HTTPClient {
        HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration(maxConcurrency: maxConcurrency, trusting: caFile))
    }

    /// The configuration of ``makeClient(maxConcurrency:trusting:)``'s clients, for a sink that
    /// makes more of them itself.
    public static func configuration(maxConcurrency: Int, trusting caFile: String? = nil) -> HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(8, maxConcurrency)
        configuration.httpVersion = .automatic
        configuration.redirectConfiguration = .disallow
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile { tls.additionalTrustRoots = [.file(caFile)] }
        configuration.tlsConfiguration = tls
        return configuration
    }

    /// `count` clients of the sink's own, closed by ``shutdown()``.
    public init(count: Int, maxConcurrency: Int, trusting caFile: String? = nil) {
        let clients = (0..<max(1, count)).map { _ in Self.makeClient(maxConcurrency: maxConcurrency, trusting: caFile) }
        self.primary = clients[0]
        self.clients = clients
        self.owned = true
    }

    /// Clients of the sink's own for requests to `endpoint`: `connections` of them (by default
    /// ``connections(forConcurrency:streamsPerConnection:)``) when it is `https`, where HTTP/2
    /// puts every request on one connection per client; one for `http`, whose HTTP/1.1 pool
    /// opens a connection per request in flight anyway.
    public convenience init(endpoint: String, maxConcurrency: Int, connections: Int? = nil, trusting caFile: String? = nil) {
        let count = endpoint.hasPrefix("https://") ? connections ?? Self.connections(forConcurrency: maxConcurrency) : 1
        self.init(count: count, maxConcurrency: maxConcurrency, trusting: caFile)
    }

    /// The caller's one client, which the caller closes.
    public init(borrowing client: HTTPClient) {
        self.primary = client
        self.clients = [client]
        self.owned = false
    }

    /// The client for the next request.
    public func next() -> HTTPClient {
        guard clients.count > 1 else { return primary }
        let index = turn.wrappingAdd(1, ordering: .relaxed).oldValue
        return clients[Int(UInt(bitPattern: index) % UInt(clients.count))]
    }

    /// Closes the clients this made; a borrowed one is the caller's to close.
    public func shutdown() async {
        guard owned else { return }
        for client in clients { try? await client.shutdown() }
    }
}
