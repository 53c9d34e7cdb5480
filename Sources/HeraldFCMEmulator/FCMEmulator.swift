public import Foundation
import HTTPTypes
public import HeraldEmulatorSupport
import Hummingbird
import JWTKit
import NIOCore
import Synchronization
import _CryptoExtras

/// A local stand-in for Google's OAuth token endpoint and FCM HTTP v1, for developers and tests.
///
/// It makes its own service account (an RSA key pair), verifies the RS256 JWT-bearer assertion
/// against it, issues access tokens and checks them on every send, validates each message's
/// shape, records it, and scripts failures by token prefix:
///
/// | prefix | answer |
/// |---|---|
/// | `dead-` | 404 UNREGISTERED |
/// | `invalid-` | 400 INVALID_ARGUMENT with an FcmError (bad registration token) |
/// | `mismatch-` | 403 SENDER_ID_MISMATCH |
/// | `flaky-` | 503 UNAVAILABLE twice, then success |
/// | `quota-` | 429 QUOTA_EXCEEDED with `Retry-After: 2` once, then success |
/// | `slow-` | success after 2 s |
public final class FCMEmulator: Sendable {
    public struct Configuration: Sendable {
        public var host = "127.0.0.1"
        public var port = 0
        public var projectID = "herald-emulator"
        public var clientEmail = "herald@herald-emulator.iam.gserviceaccount.com"
        /// `expires_in` of issued access tokens, in seconds.
        public var tokenLifetime = 3600
        /// `Retry-After` seconds for `quota-` tokens.
        public var quotaRetryAfter = 2
        /// Latency of `slow-` tokens.
        public var slowLatency: Duration = .seconds(2)
        /// When set, `slow-` sends are answered as soon as this many sends are in flight at
        /// once (all of them, from then on), or after `slowLatency` if that never happens: a
        /// test of concurrency that does not depend on how fast a loaded machine sends.
        public var releaseSlowSendsAt: Int?
        /// Serve HTTP/2 over TLS (ALPN, HTTP/1.1 still offered) with a certificate minted at
        /// start, as Google does, instead of plain HTTP/1.1.
        public var tls = false
        /// Every message (each notification to each token) is answered 503 UNAVAILABLE on its
        /// first this many attempts, then accepted: a provider under load, failing part of the
        /// time while most of the service works (`--fail-first N`).
        public var failFirst = 0
        /// The faults a provider under load shows (`--fail-rate` and the rest).
        public var faults = FaultModes()

        public init() {}
    }

    /// One request to messages:send, as the emulator saw and answered it.
    public struct Received: Sendable {
        public var status: Int
        public var body: Data
        public var at: Date
        public var validateOnly: Bool
        /// "2" or "1.1".
        public var httpVersion: String
    }

    struct State {
        var issuedTokens: Set<String> = []
        var tokenRequests = 0
        var received: [Received] = []
        /// Messages answered 200 (not validate-only), for `GET /emulator/stats`.
        var delivered = 0
        var attemptsByToken: [String: Int] = [:]
        /// Attempts of each message, by token and the notification id in its data.
        var attemptsByMessage: [String: Int] = [:]
        /// Times each message was accepted, by the same key, and when it first was.
        var acceptedByMessage: [String: (count: Int, first: Date)] = [:]
        /// Acceptances of a message after its first, summed over messages.
        var acceptedTwice = 0
        /// When each message accepted more than once was first accepted (seconds since 1970,
        /// the first 10 000).
        var acceptedTwiceFirstAt: [Double] = []
        /// Requests received, by HTTP version.
        var requestsByHTTPVersion: [String: Int] = [:]
        var port: Int?
        var tokenEndpointDown = false
        /// Instance ID topic membership: topic → registration tokens.
        var topicMembers: [String: Set<String>] = [:]
        /// Per topic: messages accepted, and the devices they reached (members at the time).
        var topicMessages: [String: Int] = [:]
        var topicDeliveries: [String: Int] = [:]
        var membershipRequests = 0
        /// The connections sends came over (an HTTP/2 client multiplexes them on one).
        var sendConnections: Set<ObjectIdentifier> = []
        /// Sends being answered now, and the most there have been at once.
        var sendsInFlight = 0
        var peakSendsInFlight = 0
        /// `releaseSlowSendsAt` was reached: `slow-` sends no longer wait.
        var slowSendsReleased = false

        /// Keeps a request, counted by its HTTP version.
        mutating func record(_ request: Received) {
            received.append(request)
            requestsByHTTPVersion[request.httpVersion, default: 0] += 1
        }

        /// Counts an acceptance of the message `key`.
        mutating func accepted(_ key: String) {
            let now = Date()
            let count = acceptedByMessage[key, default: (0, now)].count + 1
            acceptedByMessage[key, default: (0, now)].count = count
            guard count > 1 else { return }
            acceptedTwice += 1
            if count == 2, acceptedTwiceFirstAt.count < 10_000, let first = acceptedByMessage[key]?.first {
                acceptedTwiceFirstAt.append(first.timeIntervalSince1970)
            }
        }
    }

    public let configuration: Configuration
    let privateKey: JWTKit.Insecure.RSA.PrivateKey
    let keyID = UUID().uuidString.lowercased()
    let state = Mutex(State())
    /// Each request's line.
    let print: RequestLog
    /// The certificate a client must trust, when it serves TLS.
    public let certificate: SelfSignedCertificate?
    let injector: FaultInjector

    public init(configuration: Configuration = .init(), print: RequestLog = .quiet) throws {
        self.configuration = configuration
        self.injector = FaultInjector(configuration.faults)
        self.certificate = configuration.tls ? try SelfSignedCertificate(commonName: "Herald FCM emulator") : nil
        self.privateKey = try JWTKit.Insecure.RSA.PrivateKey(backing: _RSA.Signing.PrivateKey(keySize: .bits2048))
        self.print = print
    }

    /// The port the emulator listens on, once it runs.
    public var port: Int? { state.withLock { $0.port } }

    /// Drops every send for `duration` from now (zero ends an outage).
    public func outage(for duration: Duration) {
        injector.outage(for: duration)
    }

    public var baseURL: String { "\(certificate == nil ? "http" : "https")://\(configuration.host):\(port ?? configuration.port)" }

    /// A Google-style service-account JSON file for this emulator (PKCS#8 private key).
    public func serviceAccountJSON() throws -> Data {
        let account: [String: String] = [
            "type": "service_account",
            "project_id": configuration.projectID,
            "private_key_id": keyID,
            "private_key": try _RSA.Signing.PrivateKey(pemRepresentation: privateKey.pemRepresentation).pkcs8PEMRepresentation,
            "client_email": configuration.clientEmail,
            "client_id": "0",
            "token_uri": "\(baseURL)/token",
        ]
        return try JSONSerialization.data(withJSONObject: account, options: [.prettyPrinted, .sortedKeys])
    }

    public var tokenRequests: Int { state.withLock { $0.tokenRequests } }

    /// Every send request so far, answered or refused.
    public var received: [Received] { state.withLock { $0.received } }

    /// The messages FCM would have delivered: accepted sends that were not dry runs.
    public var deliveredMessages: [[String: Any]] {
        received.filter { $0.status == 200 && !$0.validateOnly }.compactMap { item in
            (try? JSONSerialization.jsonObject(with: item.body) as? [String: Any])?["message"] as? [String: Any]
        }
    }

    /// The registration tokens in `topic` (added by `iid/v1:batchAdd`, not since removed).
    public func members(of topic: String) -> Set<String> {
        state.withLock { $0.topicMembers[topic] ?? [] }
    }

    /// Calls to `iid/v1:batchAdd` and `:batchRemove` so far.
    public var membershipRequests: Int { state.withLock { $0.membershipRequests } }

    /// How many connections the sends so far came over.
    public var sendConnections: Int { state.withLock { $0.sendConnections.count } }

    /// The most sends that were being answered at once (over HTTP/2, at most the streams the
    /// emulator allows per connection, 100 as FCM does, times the connections).
    public var peakSendsInFlight: Int { state.withLock { $0.peakSendsInFlight } }

    /// Devices a topic's accepted messages reached: its members when each was sent.
    public func topicDeliveries(_ topic: String) -> Int {
        state.withLock { $0.topicDeliveries[topic] ?? 0 }
    }

    /// Makes the token endpoint answer 503 (true) or work again (false), to test outages.
    public func setTokenEndpointDown(_ down: Bool) {
        state.withLock { $0.tokenEndpointDown = down }
    }

    public func reset() {
        state.withLock { state in
            state.received = []
            state.delivered = 0
            state.attemptsByToken = [:]
            state.attemptsByMessage = [:]
            state.acceptedByMessage = [:]
            state.acceptedTwice = 0
            state.acceptedTwiceFirstAt = []
            state.requestsByHTTPVersion = [:]
            state.tokenRequests = 0
            state.topicMessages = [:]
            state.topicDeliveries = [:]
        }
    }

    /// Runs until cancelled; `onRunning` gets the bound port.
    public func run(onRunning: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        let router = Router(context: EmulatorRequestContext.self)
        router.post("/token") { request, context in try await self.token(request, context: context) }
        router.post("/v1/projects/{project}/messages:send") { request, context in try await self.send(request, context: context) }
        router.post("/iid/v1:batchAdd") { request, _ in try await self.membership(request, add: true) }
        router.post("/iid/v1:batchRemove") { request, _ in try await self.membership(request, add: false) }
        router.get("/emulator/topics") { _, _ in try self.topics() }
        router.get("/emulator/messages") { _, _ in try self.inspection() }
        router.get("/emulator/stats") { _, _ in try self.stats() }
        router.post("/emulator/outage") { request, _ in
            let seconds = request.uri.queryParameters.get("seconds").flatMap(Double.init) ?? 0
            guard seconds.isFinite, (0...3_600).contains(seconds) else { return Response(status: .badRequest) }
            self.outage(for: .seconds(seconds))
            return Response(status: .noContent)
        }
        router.delete("/emulator/messages") { _, _ in
            self.reset()
            return Response(status: .noContent)
        }
        try await EmulatorServer.run(router, name: "fcm-emulator", host: configuration.host, port: configuration.port, certificate: certificate) { port in
            self.state.withLock { $0.port = port }
            await onRunning(port)
        }
    }
}
