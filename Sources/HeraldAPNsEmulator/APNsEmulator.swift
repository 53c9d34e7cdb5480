import Crypto
public import Foundation
import HTTPTypes
public import HeraldEmulatorSupport
import Hummingbird
import NIOCore
import Synchronization

/// A local stand-in for APNs: HTTP/2 over TLS with a certificate it mints (trusted by its PEM,
/// `--write-ca`), a `.p8` provider key it writes out, every provider token verified (ES256, `kid`,
/// `iss`, age under an hour), headers and payload checked, and answers by token prefix:
///
/// | token starts with | answer |
/// |---|---|
/// | `gone-` | 410 Unregistered |
/// | `bad-` | 400 BadDeviceToken |
/// | `flaky-` | 503 ServiceUnavailable twice, then 200 |
/// | `busy-` | 429 TooManyRequests once, then 200 |
/// | `expired-` | 403 ExpiredProviderToken for the first provider token it sees, then 200 |
public final class APNsEmulator: Sendable {
    public struct Configuration: Sendable {
        public var host = "127.0.0.1"
        public var port = 0
        /// The common name of its self-signed certificate: two emulators a client trusts at once
        /// (one standing for each APNs environment) need two names.
        public var certificateName = "Herald APNs emulator"
        public var keyID = "HERALDKEY1"
        public var teamID = "HERALDTEAM"
        public var topic = "com.example.herald"
        /// The faults of a provider under load (`--fail-rate` and the rest).
        public var faults = FaultModes()
        public init() {}
    }

    public struct Received: Sendable {
        public var token: String
        public var status: Int
        public var reason: String?
        public var headers: [String: String]
        public var payload: Data
        /// The HTTP version the request came over: APNs speaks HTTP/2 only.
        public var httpVersion: String
    }

    struct State {
        var received: [Received] = []
        var attempts: [String: Int] = [:]
        var port: Int?
    }

    public let configuration: Configuration
    public let certificate: SelfSignedCertificate
    /// The provider key, as Apple's `.p8` file holds it.
    public let providerKey: P256.Signing.PrivateKey
    let state = Mutex(State())
    /// Each request's line.
    let print: RequestLog

    let injector: FaultInjector

    /// Drops every push for `duration` from now (zero ends an outage).
    public func outage(for duration: Duration) {
        injector.outage(for: duration)
    }

    public init(configuration: Configuration = .init(), print: RequestLog = .quiet) throws {
        self.configuration = configuration
        self.injector = FaultInjector(configuration.faults)
        self.certificate = try SelfSignedCertificate(commonName: configuration.certificateName)
        self.providerKey = P256.Signing.PrivateKey()
        self.print = print
    }

    public var port: Int? { state.withLock { $0.port } }
    public var baseURL: String { "https://\(configuration.host):\(port ?? configuration.port)" }
    public var received: [Received] { state.withLock { $0.received } }
    /// The `.p8` file's contents (PKCS#8 PEM).
    public var providerKeyPEM: String { providerKey.pemRepresentation }

    public func run(onRunning: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        let router = Router(context: EmulatorRequestContext.self)
        router.post("/3/device/{token}") { request, context in try await self.push(request, context: context) }
        router.get("/emulator/messages") { _, _ in
            try EmulatorServer.json(
                self.received.map { item -> [String: Any] in
                    [
                        "token": item.token, "status": item.status, "reason": item.reason ?? NSNull(), "headers": item.headers,
                        "payload": (try? JSONSerialization.jsonObject(with: item.payload)) ?? NSNull(), "http_version": item.httpVersion,
                    ]
                })
        }
        router.get("/emulator/stats") { _, _ in
            let received = self.received
            return try EmulatorServer.json(["requests": received.count, "delivered": received.filter { $0.status == 200 }.count])
        }
        try await EmulatorServer.run(router, name: "apns-emulator", host: configuration.host, port: configuration.port, certificate: certificate) { port in
            self.state.withLock { $0.port = port }
            await onRunning(port)
        }
    }

    func push(_ request: Request, context: EmulatorRequestContext) async throws -> Response {
        let token = context.parameters.get("token") ?? ""
        var request = request
        let payload = Data(try await request.collectBody(upTo: 64 * 1024).readableBytesView)
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName.lowercased()] = field.value }
        func answer(_ status: HTTPResponse.Status, _ reason: String? = nil) throws -> Response {
            state.withLock {
                $0.received.append(
                    Received(token: token, status: Int(status.code), reason: reason, headers: headers, payload: payload, httpVersion: context.httpVersion))
            }
            print("apns-emulator: \(status.code)\(reason.map { " \($0)" } ?? "") \(token): \(String(decoding: payload, as: UTF8.self))")
            guard let reason else { return Response(status: status) }
            // APNs says since when a token is no longer valid, in milliseconds, on a 410.
            if status == .gone { return try EmulatorServer.json(["reason": reason, "timestamp": Int64(Date().timeIntervalSince1970 * 1000)], status: status) }
            return try EmulatorServer.json(["reason": reason], status: status)
        }
        // APNs refuses HTTP/1.1.
        guard context.httpVersion == "2" else { return try answer(.badRequest, "UnsupportedHTTPVersion") }
        switch try await injector.next() {
        case .drop?:
            state.withLock {
                $0.received.append(Received(token: token, status: 0, reason: "dropped", headers: headers, payload: payload, httpVersion: context.httpVersion))
            }
            context.requestChannel.close(promise: nil)
            throw CancellationError()
        case .unavailable?: return try answer(.serviceUnavailable, "ServiceUnavailable")
        case .rateLimited?: return try answer(.tooManyRequests, "TooManyRequests")
        case nil: break
        }
        if let problem = APNsTokenCheck.problem(
            headers["authorization"], key: providerKey.publicKey, keyID: configuration.keyID, teamID: configuration.teamID, now: Date())
        {
            return try answer(.forbidden, problem)
        }
        guard headers["apns-topic"] == configuration.topic else { return try answer(.badRequest, "BadTopic") }
        let pushType = headers["apns-push-type"]
        guard pushType == "alert" || pushType == "background" else { return try answer(.badRequest, "InvalidPushType") }
        guard headers["apns-priority"] == (pushType == "alert" ? "10" : "5") else { return try answer(.badRequest, "BadPriority") }
        guard let id = headers["apns-id"], UUID(uuidString: id) != nil else { return try answer(.badRequest, "BadMessageId") }
        if let collapse = headers["apns-collapse-id"], collapse.utf8.count > 64 { return try answer(.badRequest, "BadCollapseId") }
        guard payload.count <= 4_096 else { return try answer(.contentTooLarge, "PayloadTooLarge") }
        guard let object = (try? JSONSerialization.jsonObject(with: payload)) as? [String: Any], object["aps"] is [String: Any] else {
            return try answer(.badRequest, "PayloadEmpty")
        }
        let attempt = state.withLock { state -> Int in
            state.attempts[token, default: 0] += 1
            return state.attempts[token] ?? 1
        }
        if token.hasPrefix("gone-") { return try answer(.gone, "Unregistered") }
        if token.hasPrefix("bad-") { return try answer(.badRequest, "BadDeviceToken") }
        if token.hasPrefix("flaky-") && attempt <= 2 { return try answer(.serviceUnavailable, "ServiceUnavailable") }
        if token.hasPrefix("busy-") && attempt == 1 { return try answer(.tooManyRequests, "TooManyRequests") }
        if token.hasPrefix("expired-") && attempt == 1 { return try answer(.forbidden, "ExpiredProviderToken") }
        return try answer(.ok)
    }
}

/// What APNs checks of `authorization: bearer <JWT>`.
enum APNsTokenCheck {
    static func problem(_ header: String?, key: P256.Signing.PublicKey, keyID: String, teamID: String, now: Date) -> String? {
        guard let header, header.lowercased().hasPrefix("bearer ") else { return "MissingProviderToken" }
        guard let token = ES256Token(String(header.dropFirst(7)), key: key), token.header["kid"] as? String == keyID,
            token.claims["iss"] as? String == teamID, let iat = token.claims["iat"] as? Int
        else { return "InvalidProviderToken" }
        let age = now.timeIntervalSince1970 - Double(iat)
        if age > 3_600 { return "ExpiredProviderToken" }
        if age < -60 { return "InvalidProviderToken" }
        return nil
    }
}
