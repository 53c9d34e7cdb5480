import Crypto
public import Foundation
import HTTPTypes
import HeraldCore
import HeraldEmulatorSupport
import HeraldWebPushSink
import Hummingbird
import NIOCore
import Synchronization

/// A local stand-in for a browser's push service (RFC 8030), for developers and tests.
///
/// It makes subscriptions of its own (a P-256 key pair and an auth secret each, as a browser
/// does), verifies every request's VAPID signature (RFC 8292: ES256, `aud` its origin, `exp`
/// within 24 hours, a `sub`), decrypts every message (RFC 8291, aes128gcm) and keeps the
/// plaintext, and scripts failures by the subscription's name:
///
/// | name starts with | answer |
/// |---|---|
/// | `gone-` | 410 Gone |
/// | `missing-` | 404 Not Found |
/// | `big-` | 413 Payload Too Large |
/// | `flaky-` | 503 twice, then 201 |
/// | `down-` | 503, always |
/// | `busy-` | 429 with `Retry-After: 1` once, then 201 |
/// | `moved-` | 307 to `/redirected/<name>`, which answers 201 to a sender that follows it |
public final class WebPushEmulator: Sendable {
    public struct Configuration: Sendable {
        public var host = "127.0.0.1"
        public var port = 0
        /// The faults of a push service under load (`--fail-rate` and the rest).
        public var faults = FaultModes()
        public init() {}
    }

    /// One push request, as the emulator saw and answered it.
    public struct Received: Sendable {
        public var subscription: String
        public var status: Int
        /// The decrypted message, when the request was valid.
        public var plaintext: String?
        public var headers: [String: String]
        public var error: String?
    }

    struct Subscription {
        var key: P256.KeyAgreement.PrivateKey
        var auth: Data
    }

    struct State {
        var subscriptions: [String: Subscription] = [:]
        var received: [Received] = []
        var attempts: [String: Int] = [:]
        var port: Int?
    }

    public let configuration: Configuration
    let state = Mutex(State())
    /// Each request's line.
    let print: RequestLog

    let injector: FaultInjector

    public init(configuration: Configuration = .init(), print: RequestLog = .quiet) {
        self.configuration = configuration
        self.print = print
        self.injector = FaultInjector(configuration.faults)
    }

    /// Drops every push for `duration` from now (zero ends an outage).
    public func outage(for duration: Duration) {
        injector.outage(for: duration)
    }

    public var port: Int? { state.withLock { $0.port } }
    public var baseURL: String { "http://\(configuration.host):\(port ?? configuration.port)" }
    public var received: [Received] { state.withLock { $0.received } }

    /// A new subscription named `name`, as `PushSubscription.toJSON()` gives it:
    /// `{"endpoint", "keys": {"p256dh", "auth"}}`.
    public func subscribe(_ name: String = UUID().uuidString.lowercased()) -> [String: Any] {
        let subscription = Subscription(key: P256.KeyAgreement.PrivateKey(), auth: Data((0..<16).map { _ in UInt8.random(in: 0...255) }))
        state.withLock { $0.subscriptions[name] = subscription }
        return [
            "endpoint": "\(baseURL)/push/\(name)",
            "keys": ["p256dh": Base64URL.encode(subscription.key.publicKey.x963Representation), "auth": Base64URL.encode(subscription.auth)],
        ]
    }

    /// Runs until cancelled; `onRunning` gets the bound port.
    public func run(onRunning: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        let router = Router(context: EmulatorRequestContext.self)
        router.post("/push/{name}") { request, context in try await self.push(request, context: context) }
        router.post("/emulator/subscriptions") { request, _ in
            let name = request.uri.queryParameters.get("name").flatMap { $0.isEmpty ? nil : $0 } ?? UUID().uuidString.lowercased()
            return try EmulatorServer.json(self.subscribe(name), status: .created)
        }
        router.get("/emulator/messages") { _, _ in
            try EmulatorServer.json(
                self.received.map {
                    [
                        "subscription": $0.subscription, "status": $0.status, "plaintext": $0.plaintext ?? NSNull(), "headers": $0.headers,
                        "error": $0.error ?? NSNull(),
                    ]
                })
        }
        // Where `moved-` subscriptions redirect: a push service never does, and a sender that
        // follows one is recorded here (with `error` saying so).
        router.post("/redirected/:name") { _, context in
            let name = context.parameters.get("name") ?? ""
            self.state.withLock { $0.received.append(Received(subscription: name, status: 201, plaintext: nil, headers: [:], error: "followed a redirect")) }
            return Response(status: .created)
        }
        router.get("/emulator/stats") { _, _ in
            let received = self.received
            return try EmulatorServer.json(["requests": received.count, "delivered": received.filter { $0.status == 201 }.count])
        }
        try await EmulatorServer.run(router, name: "webpush-emulator", host: configuration.host, port: configuration.port) { port in
            self.state.withLock { $0.port = port }
            await onRunning(port)
        }
    }

    func push(_ request: Request, context: EmulatorRequestContext) async throws -> Response {
        let name = context.parameters.get("name") ?? ""
        var request = request
        let body = Data(try await request.collectBody(upTo: 8 * 1024).readableBytesView)
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName.lowercased()] = field.value }
        func answer(_ status: HTTPResponse.Status, plaintext: String? = nil, error: String? = nil, extra: [String: String] = [:]) -> Response {
            state.withLock { $0.received.append(Received(subscription: name, status: Int(status.code), plaintext: plaintext, headers: headers, error: error)) }
            print("webpush-emulator: \(status.code) \(name)\(plaintext.map { ": \($0)" } ?? "")\(error.map { " (\($0))" } ?? "")")
            var response = Response(status: status)
            for (field, value) in extra { if let name = HTTPField.Name(field) { response.headers[name] = value } }
            return response
        }
        switch try await injector.next() {
        case .drop?:
            state.withLock { $0.received.append(Received(subscription: name, status: 0, plaintext: nil, headers: headers, error: "dropped (fault mode)")) }
            context.requestChannel.close(promise: nil)
            throw CancellationError()
        case .unavailable?: return answer(.serviceUnavailable, error: "fault mode")
        case .rateLimited?: return answer(.tooManyRequests, error: "fault mode", extra: ["Retry-After": "2"])
        case nil: break
        }
        guard let subscription = state.withLock({ $0.subscriptions[name] }) else { return answer(.notFound, error: "no such subscription") }
        if let problem = VAPIDCheck.problem(headers["authorization"], origin: baseURL, now: Date()) {
            return answer(.forbidden, error: problem)
        }
        guard headers["content-encoding"] == "aes128gcm" else { return answer(.badRequest, error: "Content-Encoding must be aes128gcm") }
        guard let ttl = headers["ttl"], Int(ttl) != nil else { return answer(.badRequest, error: "a TTL header is required") }
        guard body.count <= 4_096 + 86 else { return answer(.contentTooLarge, error: "\(body.count) bytes") }
        let plaintext: Data
        do {
            plaintext = try WebPushPayload.decrypt(body, receiverKey: subscription.key, authSecret: subscription.auth)
        } catch {
            return answer(.badRequest, error: "cannot decrypt: \(error)")
        }
        let text = String(decoding: plaintext, as: UTF8.self)
        let attempt = state.withLock { state -> Int in
            state.attempts[name, default: 0] += 1
            return state.attempts[name] ?? 1
        }
        if name.hasPrefix("gone-") { return answer(.gone, plaintext: text) }
        if name.hasPrefix("missing-") { return answer(.notFound, plaintext: text) }
        if name.hasPrefix("big-") { return answer(.contentTooLarge, plaintext: text) }
        if name.hasPrefix("flaky-") && attempt <= 2 { return answer(.serviceUnavailable, plaintext: text) }
        if name.hasPrefix("down-") { return answer(.serviceUnavailable, plaintext: text) }
        if name.hasPrefix("busy-") && attempt == 1 { return answer(.tooManyRequests, plaintext: text, extra: ["Retry-After": "1"]) }
        if name.hasPrefix("moved-") { return answer(.temporaryRedirect, plaintext: text, extra: ["Location": "/redirected/\(name)"]) }
        return answer(.created, plaintext: text)
    }
}

/// What a push service checks of `Authorization: vapid t=<JWT>, k=<key>` (RFC 8292).
enum VAPIDCheck {
    /// Why the header is refused, or nil when it is good.
    static func problem(_ header: String?, origin: String, now: Date) -> String? {
        guard let header, header.hasPrefix("vapid ") else { return "Authorization must use the vapid scheme" }
        var parameters: [String: String] = [:]
        for part in header.dropFirst(6).split(separator: ",") {
            let pair = part.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1).map(String.init)
            if pair.count == 2 { parameters[pair[0]] = pair[1] }
        }
        guard let token = parameters["t"], let keyText = parameters["k"], let keyData = Base64URL.decode(keyText),
            let key = try? P256.Signing.PublicKey(x963Representation: keyData)
        else { return "vapid needs t= and k= with a P-256 public key" }
        guard let claims = ES256Token(token, key: key)?.claims else { return "the VAPID token is not an ES256 JWT signed by k" }
        guard claims["aud"] as? String == origin else { return "aud must be \(origin)" }
        guard let exp = claims["exp"] as? Int, Double(exp) > now.timeIntervalSince1970, Double(exp) <= now.timeIntervalSince1970 + 86_400 else {
            return "exp must be in the next 24 hours"
        }
        guard let sub = claims["sub"] as? String, sub.hasPrefix("mailto:") || sub.hasPrefix("https:") else { return "sub must be mailto: or https:" }
        return nil
    }
}
