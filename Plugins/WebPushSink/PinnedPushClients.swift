import AsyncHTTPClient
import Foundation
import Synchronization

/// HTTP clients that connect to a push service's host at the address the sink judged, not at
/// whatever the name resolves to when the connection opens: a DNS server that answered with a
/// public address for the check and answers 127.0.0.1 a second later (rebinding) would
/// otherwise turn a send into the operator's network (docs/security.md, "Web Push endpoints").
/// AsyncHTTPClient's `dnsOverride` connects to the address while TLS still verifies the
/// certificate against the host name, and `Host` names it.
///
/// One client per host, replaced when its address changes. Push services are a handful of
/// hosts; clients past ``capacity`` that have no send in flight are closed, least recently used
/// first, and a replaced client is closed once its sends are done.
final class PinnedPushClients: Sendable {
    private struct Entry {
        var address: String
        var client: HTTPClient
        var inFlight = 0
        var lastUsed: ContinuousClock.Instant
    }

    private struct State {
        var byHost: [String: Entry] = [:]
        /// Replaced clients with sends still in flight, by identity: closed when the last ends.
        var retiring: [ObjectIdentifier: (client: HTTPClient, inFlight: Int)] = [:]
        var closed = false
    }

    static let capacity = 64

    private let base: HTTPClient.Configuration
    private let state = Mutex(State())

    /// - Parameter base: every client's configuration, before its host's address is pinned.
    init(base: HTTPClient.Configuration) {
        self.base = base
    }

    /// Runs `body` with the client for `host` pinned at `address` (an IP address as text).
    func withClient<Result>(host: String, address: String, _ body: (HTTPClient) async throws -> Result) async throws -> Result {
        let (client, toClose) = try take(host: host, address: address)
        for old in toClose { try? await old.shutdown() }
        defer { give(back: client, host: host) }
        return try await body(client)
    }

    private func take(host: String, address: String) throws -> (HTTPClient, [HTTPClient]) {
        try state.withLock { state in
            guard !state.closed else { throw HTTPClientError.alreadyShutdown }
            let now = ContinuousClock.now
            var toClose: [HTTPClient] = []
            if var entry = state.byHost[host], entry.address == address {
                entry.inFlight += 1
                entry.lastUsed = now
                state.byHost[host] = entry
                return (entry.client, [])
            }
            if let replaced = state.byHost.removeValue(forKey: host) {
                if replaced.inFlight == 0 {
                    toClose.append(replaced.client)
                } else {
                    state.retiring[ObjectIdentifier(replaced.client)] = (replaced.client, replaced.inFlight)
                }
            }
            if state.byHost.count >= Self.capacity {
                let idle = state.byHost.filter { $0.value.inFlight == 0 }.sorted { $0.value.lastUsed < $1.value.lastUsed }
                for (name, entry) in idle.prefix(state.byHost.count - Self.capacity + 1) {
                    state.byHost[name] = nil
                    toClose.append(entry.client)
                }
            }
            var configuration = base
            configuration.dnsOverride[host] = address
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            state.byHost[host] = Entry(address: address, client: client, inFlight: 1, lastUsed: now)
            return (client, toClose)
        }
    }

    private func give(back client: HTTPClient, host: String) {
        let done = state.withLock { state -> HTTPClient? in
            if var entry = state.byHost[host], entry.client === client {
                entry.inFlight -= 1
                state.byHost[host] = entry
                return nil
            }
            let id = ObjectIdentifier(client)
            guard var retiring = state.retiring[id] else { return nil }
            retiring.inFlight -= 1
            guard retiring.inFlight == 0 else {
                state.retiring[id] = retiring
                return nil
            }
            state.retiring[id] = nil
            return client
        }
        if let done { Task { try? await done.shutdown() } }
    }

    /// A sink dropped without ``shutdown()`` (one whose client was borrowed) still closes the
    /// clients it made, as AsyncHTTPClient requires.
    deinit {
        let clients = state.withLock { state in state.byHost.values.map(\.client) + state.retiring.values.map(\.client) }
        for client in clients { client.shutdown(queue: .global()) { _ in } }
    }

    /// Closes every client; sends after it fail.
    func shutdown() async {
        let clients = state.withLock { state -> [HTTPClient] in
            state.closed = true
            defer { (state.byHost, state.retiring) = ([:], [:]) }
            return state.byHost.values.map(\.client) + state.retiring.values.map(\.client)
        }
        for client in clients { try? await client.shutdown() }
    }
}
