import AsyncHTTPClient
import NIOSSL
import Synchronization

/// The HTTP clients the FCM sink sends through, taken in turn.
///
/// Over `https` each client holds one HTTP/2 connection (AsyncHTTPClient multiplexes every
/// request to a host on one), and FCM allows 100 concurrent streams on it: a single connection
/// would hold `max_concurrency` above 100 to 100 sends in flight, the rest queued in the
/// client, and it runs on one event loop. So an `https` sink opens
/// ``FCMConfiguration/effectiveConnections`` clients. An `http` endpoint speaks HTTP/1.1,
/// whose pool already opens a connection per request in flight: one client.
final class FCMConnections: Sendable {
    /// The first client: access tokens are fetched through it.
    let primary: HTTPClient
    private let clients: [HTTPClient]
    private let owned: Bool
    private let turn = Atomic<Int>(0)

    /// FCM's limit of concurrent streams on one HTTP/2 connection.
    static let streamsPerConnection = 100

    /// A client whose connection pool does not cap concurrency below `maxConcurrency`:
    /// `HTTPClient.shared` keeps 8 HTTP/1.1 connections per host, which would serialise sends
    /// to an HTTP/1.1 endpoint (the emulator, a proxy). Over `https` it offers HTTP/2 (ALPN).
    static func makeClient(trusting caFile: String?) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 1_024
        configuration.httpVersion = .automatic
        // FCM does not redirect; a 3xx is an answer, never a reason to POST elsewhere.
        configuration.redirectConfiguration = .disallow
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile { tls.additionalTrustRoots = [.file(caFile)] }
        configuration.tlsConfiguration = tls
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// Clients of the sink's own, ``FCMConfiguration/effectiveConnections`` of them for an
    /// `https` endpoint, closed by ``shutdown()``.
    init(for configuration: FCMConfiguration) {
        let count = configuration.endpoint.hasPrefix("https://") ? configuration.effectiveConnections : 1
        let clients = (0..<max(1, count)).map { _ in Self.makeClient(trusting: configuration.caFile) }
        self.primary = clients[0]
        self.clients = clients
        self.owned = true
    }

    /// The caller's one client, which the caller closes.
    init(borrowing client: HTTPClient) {
        self.primary = client
        self.clients = [client]
        self.owned = false
    }

    /// How many clients (so, over HTTP/2, connections) sends are spread over.
    var count: Int { clients.count }

    /// The client for the next request.
    func next() -> HTTPClient {
        guard clients.count > 1 else { return primary }
        let index = turn.wrappingAdd(1, ordering: .relaxed).oldValue
        return clients[Int(UInt(bitPattern: index) % UInt(clients.count))]
    }

    /// Closes the clients the sink made; a borrowed one is the caller's to close.
    func shutdown() async {
        guard owned else { return }
        for client in clients { try? await client.shutdown() }
    }
}
