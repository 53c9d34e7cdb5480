import AsyncHTTPClient
public import Crypto
public import Foundation
public import HeraldCore
import HeraldSinkHTTP
public import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import Synchronization

/// Apple Push Notification service over HTTP/2 (`POST /3/device/{token}`), with token-based
/// authentication. Serves devices of the provider `apns`; a device's `environment` option
/// (`production` or `sandbox`) picks the host.
public final class APNsSink: ReleasingSink {
    /// The device provider this sink serves: `apns_token` registrations.
    public static let provider = "apns"

    /// Which APNs a device's token belongs to: an app built for development gets sandbox tokens.
    public enum Environment: String, Sendable, CaseIterable {
        /// Apps from the App Store or TestFlight; or apps built for development.
        case production, sandbox
    }

    /// What the sink needs: the team's `.p8` key with its ids, the app's bundle id, and limits.
    public struct Configuration: Sendable {
        /// The `.p8` key's private key.
        public var key: P256.Signing.PrivateKey
        /// The key's id in the Apple developer account (the JWT's `kid`).
        public var keyID: String
        /// The team that owns the key (the JWT's `iss`).
        public var teamID: String
        /// The app's bundle id: `apns-topic`.
        public var topic: String
        /// The environment of devices registered without one.
        public var defaultEnvironment: Environment = .production
        /// Where production tokens are sent (an emulator's URL in tests).
        public var productionEndpoint = "https://api.push.apple.com"
        /// Where sandbox tokens are sent.
        public var sandboxEndpoint = "https://api.sandbox.push.apple.com"
        /// A PEM file of certificates to trust (the emulator's), besides the system's.
        public var caFile: String?
        /// Pushes in flight at once.
        public var maxConcurrency = 64
        /// How long one push may take before it is retried.
        public var timeout: Duration = .seconds(15)

        /// A configuration with default endpoints and limits; `topic` is the app's bundle id.
        public init(key: P256.Signing.PrivateKey, keyID: String, teamID: String, topic: String) {
            self.key = key
            self.keyID = keyID
            self.teamID = teamID
            self.topic = topic
        }
    }

    /// APNs' limit for a notification payload.
    public static let maxPayloadBytes = 4_096
    /// APNs' limit on `apns-collapse-id`.
    public static let maxCollapseIDBytes = 64

    public let name: String
    public let capabilities: SinkCapabilities = [.push, .badge]
    public let providers: DeviceProviders = .only([APNsSink.provider])
    private let configuration: Configuration
    private let http: HTTPClient
    private let tokens: APNsTokenProvider
    private let logger: Logger
    private let clock: @Sendable () -> Date
    private let credentialFault = Mutex<String?>(nil)
    /// `max_concurrency`, for all of the engine's calls together.
    private let limiter: ConcurrencyLimiter

    /// A sink named `name` (one per app); `clock` is for tests.
    public init(
        name: String = "apns", configuration: Configuration, logger: Logger = Logger(label: "herald.apns"), clock: @escaping @Sendable () -> Date = { Date() }
    ) async throws {
        // One client, one connection per host: APNs allows 1 000 streams on one, so at most the
        // last 24 of a max_concurrency of 1 024 wait for a stream.
        self.http = SinkHTTPClients.makeClient(maxConcurrency: configuration.maxConcurrency, trusting: configuration.caFile)
        self.limiter = ConcurrencyLimiter(limit: configuration.maxConcurrency)
        do {
            self.tokens = try await APNsTokenProvider(key: configuration.key, keyID: configuration.keyID, teamID: configuration.teamID, clock: clock)
        } catch {
            try? await http.shutdown()
            throw error
        }
        self.name = name
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
    }

    /// Closes the HTTP client the sink owns; the sink is not used afterwards.
    public func shutdown() async {
        try? await http.shutdown()
    }

    /// Provider tokens issued so far.
    public var tokensIssued: Int {
        get async { await tokens.issued }
    }

    public func health() async -> SinkHealth {
        credentialFault.withLock { $0 }.map { .degraded(reason: $0) } ?? .ok
    }

    // MARK: Devices

    /// An APNs device token (hex from a device; any URL-safe text for the emulator's scripted
    /// tokens). A missing environment is stored as the configured default, marked as such (a
    /// token rejected under a default environment is not removed).
    public func prepare(_ registration: inout DeviceRegistration) throws {
        guard let token = registration.address.token else { throw HeraldError.invalidField(registration.addressField, "must be an APNs device token") }
        guard token.utf8.count <= 200,
            token.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 45 || $0 == 95 })
        else {
            throw HeraldError.invalidField(registration.addressField, "must be an APNs device token: at most 200 characters of hex (letters, digits, '-', '_')")
        }
        if let environment = registration.options["environment"] {
            guard Environment(rawValue: environment) != nil else { throw HeraldError.invalidField("apns_environment", "must be production or sandbox") }
        } else {
            registration.options["environment"] = configuration.defaultEnvironment.rawValue
            registration.options["environment_default"] = "true"
        }
        try registration.validateCommonFields()
    }

    // MARK: Notifications

    /// The payload for one distribution: an alert shows a banner with sound; information (and an
    /// alert in quiet hours) is a background push. The keys Herald's FCM data carries (`id`,
    /// `timestamp`, `type`, `url`) are at the top level, where an iOS app reads `userInfo`.
    /// A `badge` (the user's count, when a module keeps one) goes with an alert only: Apple
    /// wants a background push to carry nothing but `content-available`.
    static func payload(for notification: HeraldNotification, distribution: Distribution, badge: Int? = nil) -> Data {
        var object: [String: JSONValue] = notification.data.mapValues(JSONValue.string)
        object["id"] = .string(notification.id.hex)
        object["timestamp"] = .string(Timestamp.format(notification.timestamp))
        object["type"] = .string(notification.type)
        object["url"] = notification.url.map(JSONValue.string) ?? .null
        switch distribution {
        case .alert:
            object["aps"] = .object(
                [
                    "alert": .object(["title": .string(notification.title), "body": .string(notification.body)]), "sound": .string("default"),
                    "thread-id": .string(notification.type),
                ].merging(badge.map { ["badge": .integer(Int64($0))] } ?? [:]) { first, _ in first })
        case .information:
            object["aps"] = .object(["content-available": .integer(1)])
            object["title"] = .string(notification.title)
            object["body"] = .string(notification.body)
        }
        return Data(JSONValue.object(object).canonicalText.utf8)
    }

    public func validate(_ notification: HeraldNotification) throws {
        if let collapse = notification.collapseKey, collapse.utf8.count > Self.maxCollapseIDBytes {
            throw HeraldError.invalidField("collapse_key", "must be at most \(Self.maxCollapseIDBytes) bytes for APNs")
        }
        // With the widest badge a push could carry, so one the accept let through is never too
        // large once a badge is added.
        let size = Distribution.allCases.map { Self.payload(for: notification, distribution: $0, badge: .max).count }.max() ?? 0
        guard size <= Self.maxPayloadBytes else {
            throw HeraldError(
                .unprocessable, code: "payload_too_large_for_apns",
                "the APNs payload would be \(size) bytes; APNs allows \(Self.maxPayloadBytes) (shorten title, body or data)"
            )
        }
    }

    /// The `apns-id` for a delivery: the same on every retry, so a retry is recognisable.
    static func apnsID(for delivery: Delivery) -> String {
        var bytes = Array(SHA256.hash(data: Data("herald-apns:\(delivery.notification.id.hex):\(delivery.id)".utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13],
                bytes[14], bytes[15]
            )
        ).uuidString
    }

    /// The request headers for a delivery, authorization aside.
    func headers(for delivery: Delivery) -> [(String, String)] {
        let n = delivery.notification
        var headers = [
            ("apns-topic", configuration.topic), ("apns-id", Self.apnsID(for: delivery)),
            ("apns-push-type", delivery.distribution == .alert ? "alert" : "background"),
            ("apns-priority", delivery.distribution == .alert ? "10" : "5"),
            ("apns-expiration", n.expiresAt.map { String(max(0, Int64(saturating: $0.timeIntervalSince1970))) } ?? "0"),
        ]
        if let collapse = n.collapseKey { headers.append(("apns-collapse-id", collapse)) }
        return headers
    }

    public func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] {
        await deliverConcurrently(batch.count, sharing: limiter) { index in await self.send(batch[index], refreshed: false) }
    }

    private func send(_ delivery: Delivery, refreshed: Bool) async -> DeliveryOutcome {
        guard let device = delivery.recipient.device, let token = device.token else {
            return .failed(reason: "the device has no APNs token", scope: .recipient)
        }
        let environment = device.options["environment"].flatMap(Environment.init(rawValue:)) ?? configuration.defaultEnvironment
        let explicitEnvironment = device.options["environment_default"] == nil
        let base = environment == .production ? configuration.productionEndpoint : configuration.sandboxEndpoint
        do {
            let provider = try await tokens.token()
            var headers = HTTPHeaders([("authorization", "bearer \(provider.value)"), ("content-type", "application/json")])
            headers.add(contentsOf: self.headers(for: delivery))
            let response = try await http.post(
                "\(base)/3/device/\(token)", headers: headers,
                body: ByteBuffer(data: Self.payload(for: delivery.notification, distribution: delivery.distribution, badge: delivery.badge)), keep: 64 * 1024,
                timeout: configuration.timeout)
            let body = response.body
            let status = response.status
            if status == 200 {
                credentialFault.withLock { $0 = nil }
                return .delivered
            }
            // `{"reason": …}`, with a numeric `timestamp` beside it on a 410: only the reason is read.
            struct Answer: Decodable { var reason: String? }
            let reason = (try? JSONDecoder().decode(Answer.self, from: Data(buffer: body)))?.reason ?? "no reason"
            let text = "APNs (\(environment.rawValue)) answered \(status) \(reason)"
            let after = response.headers.first(name: "retry-after").flatMap { RetryAfter.parse($0, now: clock()) }
            switch (status, reason) {
            case (410, _), (400, "Unregistered"):
                return .recipientGone(reason: text)
            case (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"):
                guard explicitEnvironment else {
                    // The device never said which environment it is in: this may be a sandbox
                    // token sent to production, a configuration fault, so the device is kept.
                    logger.error("\(text) for a device registered without apns_environment: check sinks.\(name).environment; the device is kept")
                    return .failed(reason: "\(text) (the device's environment was the default; kept)", scope: .recipient)
                }
                return .recipientGone(reason: text)
            case (403, "ExpiredProviderToken") where !refreshed:
                _ = try await tokens.expired(provider)
                return await send(delivery, refreshed: true)
            case (403, _) where explicitEnvironment && environment != configuration.defaultEnvironment:
                // The device chose the other environment at registration (anyone who registers a
                // device may): a key refused there says nothing of the sink's own environment.
                return .failed(
                    reason: "\(text): the key of sink '\(name)' is refused in the \(environment.rawValue) environment this device registered for",
                    scope: .recipient)
            case (403, _):
                let fault = "\(text): the key, key id or team id of sink '\(name)' was refused"
                credentialFault.withLock { $0 = fault }
                logger.error("\(fault)")
                // APNs checks the provider token before the device: a 403 is the operator's key.
                return .retry(after: after, reason: fault, scope: .credentials)
            case (429, _):
                // TooManyRequests: too many pushes to this one device token.
                return .retry(after: after, reason: text, scope: .recipient)
            case (500...599, _):
                // APNs answered: it is up, and this push waits its own backoff.
                return .retry(after: after, reason: text, scope: .message)
            default:
                return .failed(reason: text, scope: .message)
            }
        } catch {
            return .retry(after: nil, reason: "APNs (\(environment.rawValue)) did not answer: \(error)", scope: .provider)
        }
    }
}
