public import AsyncHTTPClient
import Crypto
public import Foundation
public import HeraldCore
import HeraldSinkHTTP
public import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import Synchronization

/// Web Push (RFC 8030) to browsers' push services: each message encrypted for its subscription
/// (RFC 8291, aes128gcm) and signed with the application server's VAPID key (RFC 8292). Serves
/// devices of the provider `webpush`, whose address is the subscription object.
public final class WebPushSink: ReleasingSink {
    /// The device provider this sink serves: `web_push` registrations.
    public static let provider = "webpush"

    /// The VAPID key and subject the sink signs with, and its limits.
    public struct Configuration: Sendable {
        /// The application server key subscriptions were made for.
        public var vapid: VAPIDKey
        /// The operator's contact for push services: `mailto:` or `https:`.
        public var subject: String
        /// Seconds a push service keeps an undelivered message when the notification has no
        /// `expires_at`.
        public var ttl = 86_400
        /// Pushes in flight at once.
        public var maxConcurrency = 64
        /// How long a push service may take to answer before the push is retried.
        public var timeout: Duration = .seconds(15)
        /// Whether endpoints at loopback, private or link-local addresses (and plain `http` on
        /// loopback) are accepted: for a push service emulator on this machine, never in
        /// production, where a subscription is whatever a client sent (`PushServiceHost`).
        public var allowsPrivateEndpoints = false
        /// Push services whose refusal of several subscriptions, with no send accepted between,
        /// proves the VAPID key or subject wrong (HeraldCore's `CredentialRefusals`): the browsers' own. A
        /// refusal anywhere else is about that subscription alone.
        public var credentialWitnesses: Set<String> = Self.browserPushServices

        /// Chrome's, Firefox's, Safari's and Edge's push services.
        public static let browserPushServices: Set<String> = [
            "fcm.googleapis.com", "updates.push.services.mozilla.com", "web.push.apple.com", ".notify.windows.com",
        ]

        /// A configuration with default limits; `subject` is a `mailto:` or `https:` contact.
        public init(vapid: VAPIDKey, subject: String) {
            self.vapid = vapid
            self.subject = subject
        }
    }

    public let name: String
    public let capabilities: SinkCapabilities = [.push, .endpointPerDevice, .badge]
    public let providers: DeviceProviders = .only([WebPushSink.provider])
    let configuration: Configuration
    private let clients: SinkHTTPClients
    private let logger: Logger
    private let clock: @Sendable () -> Date
    /// Refusals that may mean the VAPID key: the sink is degraded only when they prove it.
    private let refusals: CredentialRefusals
    private let vapidHeaders = VAPIDHeaders()
    private let resolver: PushServiceResolver
    /// Push services that answer none of their sends: held, so they cannot hold this sink.
    let silentServices = SilentPushServices()
    /// Clients that connect to the address a host was judged by (nil with allow_private_endpoints).
    let pinned: PinnedPushClients?
    private let connectAddress: @Sendable ([UInt8]) -> String

    /// - Parameters:
    ///   - name: the sink instance's name (`sinks.<name>`).
    ///   - configuration: the VAPID key and subject, limits and witnesses.
    ///   - http: a client the caller owns; by default the sink makes its own (HeraldSinkHTTP's
    ///     `SinkHTTPClients`: no redirects, one per 100 of `maxConcurrency`, since a push
    ///     service such as Google's allows 100 streams on one HTTP/2 connection) and closes
    ///     them when ``run()`` ends.
    ///   - logger: where refusals and failures are reported.
    ///   - clock: the time VAPID tokens and retries are judged by (tests move it).
    public convenience init(
        name: String = "webpush", configuration: Configuration, http: HTTPClient? = nil, logger: Logger = Logger(label: "herald.webpush"),
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.init(name: name, configuration: configuration, http: http, logger: logger, clock: clock, resolver: PushServiceResolver())
    }

    /// - Parameter resolver: how an endpoint's host name is judged before each send.
    /// - Parameter admissionLookupLimit: how long a registration waits for the resolver.
    /// - Parameter sendLookupLimit: how long a send waits for it.
    /// - Parameter pinnedConfiguration: the clients that connect to judged addresses
    ///   (``PinnedPushClients``) are made with it; by default the sink's own clients' configuration.
    /// - Parameter connectAddress: where a judged address is connected: the address itself.
    ///   Tests stand a loopback listener in for a public address with it.
    init(
        name: String, configuration: Configuration, http: HTTPClient?, logger: Logger, clock: @escaping @Sendable () -> Date, resolver: PushServiceResolver,
        admissionLookupLimit: Duration = .seconds(1), sendLookupLimit: Duration = .seconds(5), pinnedConfiguration: HTTPClient.Configuration? = nil,
        connectAddress: @escaping @Sendable ([UInt8]) -> String = PushServiceHost.text(address:)
    ) {
        self.resolver = resolver
        self.connectAddress = connectAddress
        // Without the judging (allow_private_endpoints) there is no address to hold a host to.
        self.pinned =
            configuration.allowsPrivateEndpoints
            ? nil : PinnedPushClients(base: pinnedConfiguration ?? SinkHTTPClients.configuration(maxConcurrency: configuration.maxConcurrency))
        self.admissionLookupLimit = admissionLookupLimit
        self.sendLookupLimit = sendLookupLimit
        self.name = name
        self.configuration = configuration
        // A subscription's endpoint is whatever a browser (or anyone registering one) sent: a
        // redirect from it must not carry Herald's POST on to another host, an internal one
        // included, and SinkHTTPClients follows none.
        self.clients =
            http.map { SinkHTTPClients(borrowing: $0) }
            ?? SinkHTTPClients(count: SinkHTTPClients.connections(forConcurrency: configuration.maxConcurrency), maxConcurrency: configuration.maxConcurrency)
        self.logger = logger
        self.clock = clock
        self.refusals = CredentialRefusals(witnesses: configuration.credentialWitnesses)
    }

    /// Closes the HTTP client the sink owns; the sink is not used afterwards.
    public func shutdown() async {
        await clients.shutdown()
        await pinned?.shutdown()
    }

    public func health() async -> SinkHealth {
        refusals.fault.map { .degraded(reason: $0) } ?? .ok
    }

    /// The push service a delivery goes to (its subscription endpoint's origin): the delivery
    /// engine keeps a circuit per push service, so one that is down holds back only its own
    /// subscribers' pushes.
    public func endpoint(of delivery: Delivery) -> String? {
        delivery.recipient.device.flatMap { URL(string: $0.address.key) }.flatMap(VAPIDKey.origin)
    }

    // MARK: Devices

    /// A subscription as a browser's `PushSubscription.toJSON()` gives it:
    /// `{"endpoint", "keys": {"p256dh", "auth"}}`. The endpoint identifies the device.
    public func prepare(_ registration: inout DeviceRegistration) throws {
        let field = registration.addressField
        guard let object = registration.address.value.objectValue else {
            throw HeraldError.invalidField(field, "must be a subscription object {endpoint, keys: {p256dh, auth}}")
        }
        let subscription = try Subscription(object, field: field)
        registration.address = DeviceAddress(provider: registration.address.provider, value: subscription.json, key: subscription.endpoint.absoluteString)
        try registration.validateCommonFields()
    }

    /// Refuses an endpoint inside the operator's network (`PushServiceHost`'s verdict), here
    /// and not in ``prepare(_:)``, so a subscription stored before that check can still be
    /// removed. A host name is judged when the resolver answers within
    /// `admissionLookupLimit`; a slower answer, or none, admits it (a registration should not
    /// wait on DNS), and every send judges it again.
    public func admit(_ registration: DeviceRegistration) async throws {
        guard let object = registration.address.value.objectValue, let subscription = try? Subscription(object, field: registration.addressField),
            case .refused(let problem) = await verdict(on: subscription.endpoint, waitingAtMost: admissionLookupLimit)
        else { return }
        throw HeraldError.invalidField("\(registration.addressField).endpoint", problem)
    }

    let admissionLookupLimit: Duration
    /// The errors of a send that got no answer in time: the connection's (or a queued send's
    /// wait for one) or the answer's.
    static let noAnswer: [HTTPClientError] = [.deadlineExceeded, .connectTimeout, .readTimeout, .getConnectionFromPoolTimeout]
    /// How long a send waits before trying again when the resolver is busy with other names.
    static let busyResolverDelay = Duration.seconds(5)
    /// How long a send waits for a lookup of its endpoint's name (5 s): a DNS server that never
    /// answers (anyone who may register a subscription can name one) must not hold the send,
    /// and its batch, for the resolver's own timeouts. The lookup goes on, and its verdict is
    /// there for the retry.
    let sendLookupLimit: Duration

    struct Subscription {
        var endpoint: URL
        var p256dh: Data
        var auth: Data

        init(_ object: [String: JSONValue], field: String) throws {
            guard let text = object["endpoint"]?.stringValue, let url = URL(string: text), let host = url.host, !host.isEmpty,
                url.scheme == "https" || (url.scheme == "http" && Self.isLoopback(host))
            else {
                throw HeraldError.invalidField("\(field).endpoint", "must be the https URL of a push service")
            }
            if let problem = HTTPURL.problem(url) { throw HeraldError.invalidField("\(field).endpoint", problem) }
            guard let keys = object["keys"]?.objectValue else { throw HeraldError.missingField("\(field).keys") }
            guard let p256dh = keys["p256dh"]?.stringValue.flatMap(Base64URL.decode), p256dh.count == 65,
                (try? P256.KeyAgreement.PublicKey(x963Representation: p256dh)) != nil
            else {
                throw HeraldError.invalidField("\(field).keys.p256dh", "must be a base64url P-256 public key (65 bytes, uncompressed)")
            }
            guard let auth = keys["auth"]?.stringValue.flatMap(Base64URL.decode), auth.count == 16 else {
                throw HeraldError.invalidField("\(field).keys.auth", "must be a base64url 16-byte secret")
            }
            self.endpoint = url
            self.p256dh = p256dh
            self.auth = auth
        }

        init?(device: Device) {
            guard let object = device.address.value.objectValue, let subscription = try? Subscription(object, field: "address") else { return nil }
            self = subscription
        }

        var json: JSONValue {
            .object([
                "endpoint": .string(endpoint.absoluteString),
                "keys": .object(["p256dh": .string(Base64URL.encode(p256dh)), "auth": .string(Base64URL.encode(auth))]),
            ])
        }

        /// Plain http is for a push service on this machine (the emulator) only, and only with
        /// ``Configuration/allowsPrivateEndpoints``.
        static func isLoopback(_ host: String) -> Bool {
            host == "127.0.0.1" || host == "localhost" || host == "::1" || host == "[::1]"
        }
    }

    /// What this sink makes of an endpoint's host.
    enum EndpointVerdict: Equatable {
        case allowed
        /// Inside the operator's network; the message says so and names the setting.
        case refused(String)
        /// The resolver could not judge the name now (too many lookups running, or slower than
        /// the caller would wait).
        case undecided
        /// The name resolved to no address.
        case unresolved
    }

    /// Refuses an address inside the operator's network, spelled out or resolved, unless the
    /// sink allows those. With a `limit`, a lookup slower than it is undecided.
    func verdict(on endpoint: URL, waitingAtMost limit: Duration? = nil) async -> EndpointVerdict {
        guard !configuration.allowsPrivateEndpoints, let host = endpoint.host else { return .allowed }
        let judgement = if let limit { await resolver.judgement(of: host, within: limit) } else { await resolver.judgement(of: host) }
        switch judgement {
        case .busy: return .undecided
        case .unresolved: return .unresolved
        case .publicHost: return .allowed
        case .privateHost:
            let what =
                PushServiceHost.spelledVerdict(host) == nil
                ? "resolves to a loopback, private or link-local address, not a push service's public one"
                : "must be a push service's public address, not a loopback, private or link-local one"
            return .refused("\(what) (sink '\(name)' has allow_private_endpoints off)")
        }
    }

    // MARK: Notifications

    /// What a service worker receives in its `push` event, as JSON; `badge` is the user's
    /// unread count when a module keeps one, for the worker's `navigator.setAppBadge`.
    static func payload(for notification: HeraldNotification, distribution: Distribution, badge: Int? = nil) -> Data {
        var object: [String: JSONValue] = [
            "id": .string(notification.id.hex), "timestamp": .string(Timestamp.format(notification.timestamp)), "type": .string(notification.type),
            "url": notification.url.map(JSONValue.string) ?? .null, "title": .string(notification.title), "body": .string(notification.body),
            "distribution": .string(distribution.rawValue),
        ]
        if !notification.data.isEmpty { object["data"] = .object(notification.data.mapValues(JSONValue.string)) }
        if let badge { object["badge"] = .integer(Int64(badge)) }
        return Data(JSONValue.object(object).canonicalText.utf8)
    }

    /// A notification whose payload could not fit one encrypted record is refused at accept.
    public func validate(_ notification: HeraldNotification) throws {
        // With the widest badge, so a badge added at send never makes it too large.
        let size = Distribution.allCases.map { Self.payload(for: notification, distribution: $0, badge: .max).count }.max() ?? 0
        guard size <= WebPushPayload.maxPlaintextBytes else {
            throw HeraldError(
                .unprocessable, code: "payload_too_large_for_webpush",
                "the Web Push payload would be \(size) bytes; one encrypted record holds \(WebPushPayload.maxPlaintextBytes) (shorten title, body or data)"
            )
        }
    }

    public func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] {
        await deliverConcurrently(batch.count, limit: configuration.maxConcurrency) { index in await self.send(batch[index]) }
    }

    /// Each subscription names its push service, and one that never answers holds its send for
    /// `timeout`: outcomes are reported every second as they come, so the engine records the
    /// rest of the batch (and counts it out of the sink's workload) without waiting for it.
    public func deliver(_ batch: [Delivery], reporting report: DeliveryReporter) async {
        await deliverConcurrently(batch.count, limit: configuration.maxConcurrency, reportingEvery: Self.reportInterval, to: report) { index in
            await self.send(batch[index])
        }
    }

    static let reportInterval = Duration.seconds(1)

    /// RFC 8030 headers for one message.
    static func headers(for delivery: Delivery, now: Date, defaultTTL: Int) -> [(String, String)] {
        let n = delivery.notification
        let ttl = n.expiresAt.map { max(0, Int(Int64(saturating: $0.timeIntervalSince(now)))) } ?? defaultTTL
        let urgency: String
        switch delivery.distribution {
        case .information: urgency = "low"
        case .alert: urgency = n.priority > 0 ? "high" : "normal"
        }
        var headers = [("TTL", String(ttl)), ("Urgency", urgency)]
        if let collapse = n.collapseKey { headers.append(("Topic", topic(collapse))) }
        return headers
    }

    /// RFC 8030 §5.4: a Topic is at most 32 characters of the base64url alphabet; other
    /// collapse keys are hashed into one, so equal keys still replace each other.
    static func topic(_ collapseKey: String) -> String {
        let alphabet = collapseKey.utf8.allSatisfy { ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 45 || $0 == 95 }
        if alphabet && collapseKey.utf8.count <= 32 { return collapseKey }
        return Base64URL.encode(Data(SHA256.hash(data: Data(collapseKey.utf8))).prefix(24))
    }

    private func send(_ delivery: Delivery) async -> DeliveryOutcome {
        guard let device = delivery.recipient.device, let subscription = Subscription(device: device) else {
            return .failed(reason: "the device has no usable Web Push subscription")
        }
        if let refused = await judge(subscription.endpoint) { return refused }
        let now = clock()
        let origin = VAPIDKey.origin(of: subscription.endpoint) ?? "(no origin)"
        let host = subscription.endpoint.host ?? ""
        let port = subscription.endpoint.port ?? VAPIDKey.defaultPort(scheme: subscription.endpoint.scheme ?? "https")
        let silenceKeys =
            [origin] + resolver.knownAddresses(of: host).map { SilentPushServices.key(address: $0, port: port) }
        if let until = silentServices.heldUntil(anyOf: silenceKeys, now: now) {
            return .retry(
                after: .saturating(seconds: until.timeIntervalSince(now)),
                reason: silentServices.heldUntil(origin, now: now) != nil
                    ? "push service \(origin) answered none of its last sends within \(configuration.timeout); not tried before \(Timestamp.format(until))"
                    : "push service \(origin) is at an address where sends went unanswered within \(configuration.timeout); not tried before \(Timestamp.format(until))"
            )
        }
        do {
            let body = try WebPushPayload.encrypt(
                Self.payload(for: delivery.notification, distribution: delivery.distribution, badge: delivery.badge), receiverPublicKey: subscription.p256dh,
                authSecret: subscription.auth
            )
            var headers = HTTPHeaders([
                ("Content-Type", "application/octet-stream"), ("Content-Encoding", "aes128gcm"),
                (
                    "Authorization",
                    try await vapidHeaders.authorization(for: subscription.endpoint, key: configuration.vapid, subject: configuration.subject, now: now)
                ),
            ])
            headers.add(contentsOf: Self.headers(for: delivery, now: now, defaultTTL: configuration.ttl))
            // The status is the answer; the body is read (and dropped) for the connection's sake.
            let post = { @Sendable [headers] (client: HTTPClient) in
                try await client.post(
                    subscription.endpoint.absoluteString, headers: headers, body: ByteBuffer(data: body), keep: 0, timeout: self.configuration.timeout)
            }
            let response: SinkHTTPAnswer
            if let pinned, PushServiceHost.spelledVerdict(host) == nil {
                // A name: sent to an address its judging lookup gave, never looked up again.
                guard let address = resolver.knownAddresses(of: host).first else {
                    return .retry(after: Self.busyResolverDelay, reason: "the endpoint's host name is to be judged again", scope: .recipient)
                }
                response = try await pinned.withClient(host: host, address: connectAddress(address), post)
            } else {
                response = try await post(clients.next())
            }
            silentServices.answered(silenceKeys)
            return outcome(of: response, for: subscription, origin: origin, host: host, now: now)
        } catch let error as WebPushPayload.Failure {
            return .failed(reason: "the message could not be encrypted for this subscription: \(error)")
        } catch let error as HTTPClientError where Self.noAnswer.contains(error) {
            if let until = silentServices.unanswered(silenceKeys, now: clock()) {
                logger.warning(
                    "push service \(origin) answered none of \(SilentPushServices.strikes) sends in a row; its sends wait until \(Timestamp.format(until))")
            }
            return .retry(after: nil, reason: "push service \(origin) did not answer within \(configuration.timeout): \(error)")
        } catch {
            return .retry(after: nil, reason: "push service \(origin) did not answer: \(error)")
        }
    }

    /// Whether the endpoint may be sent to now: nil when it may; else the outcome. Subscriptions
    /// stored before this check, or under another setting, are judged again, and a name by the
    /// addresses it resolves to.
    private func judge(_ endpoint: URL) async -> DeliveryOutcome? {
        switch await verdict(on: endpoint, waitingAtMost: sendLookupLimit) {
        case .allowed:
            return nil
        case .refused(let problem):
            return .failed(reason: "the subscription's endpoint \(problem)")
        case .undecided:
            return .retry(
                after: Self.busyResolverDelay,
                reason: "the endpoint's host name could not be judged now (its lookup was slow, or too many names were being looked up)")
        case .unresolved:
            // Transient as often as not (a DNS server's hiccup): tried again like a connection
            // that failed, and judged again then.
            return .retry(after: nil, reason: "the endpoint's host did not resolve to any address")
        }
    }

    /// What a push service's answer means for the delivery (RFC 8030 §5 and the services'
    /// documented statuses).
    private func outcome(of response: SinkHTTPAnswer, for subscription: Subscription, origin: String, host: String, now: Date) -> DeliveryOutcome {
        let status = response.status
        // The endpoint's path identifies the subscription: only its origin is ever shown.
        let reason = "push service \(origin) answered \(status)"
        switch status {
        case 200..<300:
            refusals.accepted(by: host)
            resolver.carriesSubscriptions(host)
            return .delivered
        case 404, 410:
            return .recipientGone(reason: "\(reason): the subscription is gone")
        case 413:
            return .failed(reason: "\(reason): the payload is too large", scope: .message)
        case 401, 403:
            // The push service refused the VAPID signature for this subscription: made for
            // another application server key, or at a server that refuses everyone. It says
            // something of the sink's own key only when a browser's push service refuses
            // several subscriptions and accepts none (``CredentialRefusals``).
            vapidHeaders.forget(subscription.endpoint)
            let refusal = "\(reason): the push service refused the VAPID signature for this subscription"
            if let fault = refusals.refused(
                endpoint: subscription.endpoint.absoluteString, by: host, reason: "\(reason): the VAPID key or subject of sink '\(name)' was refused",
                at: now)
            {
                logger.error("\(fault)")
                return .retry(after: nil, reason: fault, scope: .credentials)
            }
            return .failed(reason: refusal, scope: .recipient)
        case 429:
            // Slow down, for this sender: the push service is answering, so its circuit
            // does not count it (docs/sinks.md, "Outcomes and their scope").
            return .retry(
                after: response.headers.first(name: "Retry-After").flatMap { RetryAfter.parse($0, now: clock()) }, reason: reason, scope: .message)
        case 500...599:
            return .retry(after: response.headers.first(name: "Retry-After").flatMap { RetryAfter.parse($0, now: clock()) }, reason: reason)
        default:
            return .failed(reason: reason)
        }
    }
}
