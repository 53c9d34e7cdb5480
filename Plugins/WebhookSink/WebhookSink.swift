import AsyncHTTPClient
public import Foundation
public import HeraldCore
import HeraldSinkHTTP
public import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// An out-of-process sink: each delivery is POSTed as JSON to an operator's URL, signed per
/// the Standard Webhooks convention. 2xx is delivered; 429, 5xx and timeouts are retried
/// (Retry-After honoured), and so are 410 Gone and redirects (the endpoint's fault: the engine's
/// circuit breaker stops sending to a sink that keeps failing and probes it); other 4xx fail.
///
/// A `Service`: in Herald's service group it closes the HTTP client it owns at shutdown.
public final class WebhookSink: ReleasingSink {
    /// Where to post, the signing secret, and limits.
    public struct Configuration: Sendable {
        /// The part after `webhook:` in the sink's name, e.g. `moderation`.
        public var name: String
        /// The receiver's URL.
        public var url: String
        /// The shared secret the `webhook-signature` HMAC is made with.
        public var secret: String
        /// How long the receiver may take to answer before the post is retried.
        public var timeout: Duration = .seconds(10)
        /// Posts in flight at once.
        public var maxConcurrency = 8
        /// Notification types sent to the webhook; empty means every type.
        public var types: [String] = []
        /// Distributions sent to the webhook; empty means both.
        public var distributions: [Distribution] = []
        /// Whether engagement events are forwarded too (`type: engagement.event`).
        public var forwardsEvents = false

        /// A configuration; `types` and `distributions` empty take every notification.
        public init(name: String, url: String, secret: String, types: [String] = [], distributions: [Distribution] = []) {
            self.name = name
            self.url = url
            self.secret = secret
            self.types = types
            self.distributions = distributions
        }
    }

    public let name: String
    public let capabilities: SinkCapabilities
    private let configuration: Configuration
    private let signature: WebhookSignature
    private let clients: SinkHTTPClients
    /// `max_concurrency`, for all of the engine's calls together.
    private let limiter: ConcurrencyLimiter
    private let logger: Logger
    private let clock: @Sendable () -> Date

    /// - Parameters:
    ///   - configuration: the URL, secret and limits.
    ///   - http: a client the caller owns and closes; by default the sink makes its own and
    ///     closes them when ``run()`` ends (or ``shutdown()`` is called): `SinkHTTPClients`,
    ///     since `HTTPClient.shared` keeps 8 HTTP/1.1 connections per host (holding a
    ///     `max_concurrency` above 8 to 8) and follows redirects, which would re-send a signed
    ///     delivery wherever a 307 points, or turn it into a GET on a 301/302 and count the
    ///     GET's 200 as delivered.
    ///   - logger: where failures are reported.
    ///   - clock: the time signatures and retries are judged by (tests move it).
    public init(
        configuration: Configuration, http: HTTPClient? = nil, logger: Logger = Logger(label: "herald.webhook"),
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.name = "webhook:\(configuration.name)"
        self.capabilities = configuration.forwardsEvents ? [.perUser, .events] : .perUser
        self.configuration = configuration
        self.signature = WebhookSignature(secret: configuration.secret)
        self.clients = http.map { SinkHTTPClients(borrowing: $0) } ?? SinkHTTPClients(endpoint: configuration.url, maxConcurrency: configuration.maxConcurrency)
        self.limiter = ConcurrencyLimiter(limit: configuration.maxConcurrency)
        self.logger = logger
        self.clock = clock
    }

    /// Closes the HTTP client the sink owns; the sink is not used afterwards.
    public func shutdown() async {
        await clients.shutdown()
    }

    /// The endpoint as reasons and logs show it: no credentials, no query.
    private var shownURL: String { RedactedURL.describe(configuration.url) }

    /// The rules that send matching notifications to this webhook (`match.types`,
    /// `match.distributions`).
    public var routingRules: [RoutingRule] {
        let typeSet = configuration.types.isEmpty ? nil : Set(configuration.types)
        let chosen = Set(configuration.distributions)
        if chosen.count == 1, let only = chosen.first {
            return [RoutingRule(types: typeSet, distribution: only, add: [name])]
        }
        return [RoutingRule(types: typeSet, add: [name])]
    }

    /// Forwards engagement events, one signed POST each, `type: engagement.event`. The
    /// `webhook-id` is derived from the user and the app's event id, so a receiver drops repeats.
    public func deliverEvents(_ events: [EngagementEvent]) async -> [DeliveryOutcome] {
        guard configuration.forwardsEvents else {
            return events.map { _ in .failed(reason: "\(name) does not forward events (set forward_events: true)") }
        }
        return await deliverConcurrently(events.count, sharing: limiter) { index in
            let event = events[index]
            do {
                let body = try Self.body(for: event, at: self.clock())
                return await self.post(body, id: "evt_\(WebhookSignature.digest(event.userID + "\u{1F}" + event.eventID))")
            } catch {
                return .failed(reason: "event \(event.eventID) could not be encoded: \(error)")
            }
        }
    }

    /// The JSON body receivers get for an event: `{"type":"engagement.event","timestamp","data":{…}}`.
    static func body(for event: EngagementEvent, at now: Date) throws -> Data {
        var data: [String: Any] = [
            "event_id": event.eventID, "user_id": event.userID, "type": event.type, "at": Timestamp.format(event.at),
            "properties": try JSONSerialization.jsonObject(with: JSONEncoder().encode(event.properties)),
        ]
        if let reaction = event.reaction { data["reaction"] = reaction }
        if let card = event.card { data["card"] = card }
        if let name = event.name { data["name"] = name }
        let payload: [String: Any] = ["type": "engagement.event", "timestamp": Timestamp.format(now), "data": data]
        return try JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys, .withoutEscapingSlashes])
    }

    public func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] {
        await deliverConcurrently(batch.count, sharing: limiter) { index in
            let delivery = batch[index]
            do {
                // The id is stable across retries so receivers can drop duplicates.
                return await self.post(try Self.body(for: delivery), id: "msg_\(delivery.notification.id.hex)_\(delivery.id)")
            } catch {
                return .failed(reason: "the delivery could not be encoded: \(error)")
            }
        }
    }

    /// The JSON body receivers get: `{"type","timestamp","data":{notification, recipient, …}}`.
    static func body(for delivery: Delivery) throws -> Data {
        let n = delivery.notification
        var notification: [String: Any] = [
            "id": n.id.hex, "type": n.type, "title": n.title, "body": n.body, "url": n.url ?? NSNull(), "data": n.data,
            "timestamp": Timestamp.format(n.timestamp), "distribution": n.distribution.rawValue, "priority": n.priority,
        ]
        if let expires = n.expiresAt { notification["expires_at"] = Timestamp.format(expires) }
        if let collapse = n.collapseKey { notification["collapse_key"] = collapse }
        let payload: [String: Any] = [
            "type": "notification.delivery",
            "timestamp": Timestamp.format(Date()),
            "data": [
                "delivery_id": delivery.id, "attempt": delivery.attempt, "distribution": delivery.distribution.rawValue,
                "recipient": ["user_id": delivery.recipient.userID], "notification": notification,
            ] as [String: Any],
        ]
        return try JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys, .withoutEscapingSlashes])
    }

    private func post(_ body: Data, id: String) async -> DeliveryOutcome {
        do {
            let timestamp = Int(clock().timeIntervalSince1970)
            let headers = HTTPHeaders([
                ("Content-Type", "application/json"), ("User-Agent", "Herald-Webhook/1"), ("webhook-id", id),
                ("webhook-timestamp", String(timestamp)), ("webhook-signature", signature.sign(id: id, timestamp: timestamp, body: body)),
            ])
            // The reply is read (so the connection can be reused) but never repeated: a receiver
            // may echo what it was sent, and `last_error` is readable by every backend key. The
            // status is the answer: a long body, or one cut off, does not make a 2xx a retry.
            let response = try await clients.next().post(
                configuration.url, headers: headers, body: ByteBuffer(data: body), keep: 0,
                timeout: configuration.timeout)
            let status = response.status
            let reason = "\(shownURL) answered \(status)"
            switch status {
            case 200..<300:
                return .delivered
            case 410:
                // The endpoint is gone, perhaps only until someone fixes it: a sink-level fault.
                // The delivery waits; the engine's circuit breaker stops sending and probes.
                return .retry(after: nil, reason: "\(shownURL) answered 410 Gone")
            case 300..<400:
                // Moved: the configured URL is stale, which only its operator can fix. Following
                // would send the signed delivery wherever the answer points; it waits instead.
                let target = response.headers.first(name: "Location").flatMap { URL(string: $0, relativeTo: URL(string: configuration.url))?.absoluteString }
                let location = target.map { " to \(RedactedURL.describe($0))" } ?? ""
                return .retry(after: nil, reason: "\(reason)\(location); redirects are not followed: set the sink's url to the new address")
            case 429, 500...599:
                let after = response.headers.first(name: "Retry-After").flatMap { RetryAfter.parse($0, now: clock()) }
                return .retry(after: after, reason: reason, scope: .provider)
            case 401, 403:
                // The operator's own endpoint refused the signature: the signing secret.
                return .failed(reason: "\(reason): check the signing secret of sink '\(name)'", scope: .credentials)
            default:
                return .failed(reason: reason, scope: .message)
            }
        } catch {
            return .retry(after: nil, reason: "\(shownURL) did not answer: \(error)")
        }
    }
}
