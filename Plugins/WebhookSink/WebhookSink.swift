import AsyncHTTPClient
public import Foundation
public import HeraldCore
public import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import Synchronization

/// An out-of-process sink: each delivery is POSTed as JSON to an operator's URL, signed per
/// the Standard Webhooks convention. 2xx is delivered; 429, 5xx and timeouts are retried
/// (Retry-After honoured); 410 Gone disables the sink until Herald restarts; other 4xx fail.
public final class WebhookSink: NotificationSink {
    public struct Configuration: Sendable {
        /// The part after `webhook:` in the sink's name, e.g. `moderation`.
        public var name: String
        public var url: String
        public var secret: String
        public var timeout: Duration = .seconds(10)
        public var maxConcurrency = 8

        public init(name: String, url: String, secret: String) {
            self.name = name
            self.url = url
            self.secret = secret
        }
    }

    public let name: String
    public let capabilities: SinkCapabilities = .perUser
    private let configuration: Configuration
    private let signature: WebhookSignature
    private let http: HTTPClient
    private let logger: Logger
    private let clock: @Sendable () -> Date
    private let disabledReason = Mutex<String?>(nil)

    public init(configuration: Configuration, http: HTTPClient = .shared, logger: Logger = Logger(label: "herald.webhook"), clock: @escaping @Sendable () -> Date = { Date() }) {
        self.name = "webhook:\(configuration.name)"
        self.configuration = configuration
        self.signature = WebhookSignature(secret: configuration.secret)
        self.http = http
        self.logger = logger
        self.clock = clock
    }

    /// Why the sink stopped sending, if the endpoint answered 410 Gone.
    public var disabled: String? { disabledReason.withLock { $0 } }

    public func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] {
        await withTaskGroup(of: (Int, DeliveryOutcome).self) { group in
            var outcomes = [DeliveryOutcome](repeating: .retry(after: nil, reason: "not sent"), count: batch.count)
            var next = 0
            func schedule() {
                let index = next
                next += 1
                group.addTask { (index, await self.post(batch[index])) }
            }
            while next < min(configuration.maxConcurrency, batch.count) { schedule() }
            while let (index, outcome) = await group.next() {
                outcomes[index] = outcome
                if next < batch.count { schedule() }
            }
            return outcomes
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

    private func post(_ delivery: Delivery) async -> DeliveryOutcome {
        if let reason = disabled { return .failed(reason: reason) }
        do {
            let body = try Self.body(for: delivery)
            // The id is stable across retries so receivers can drop duplicates.
            let id = "msg_\(delivery.notification.id.hex)_\(delivery.id)"
            let timestamp = Int(clock().timeIntervalSince1970)
            var request = HTTPClientRequest(url: configuration.url)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "User-Agent", value: "Herald-Webhook/1")
            request.headers.add(name: "webhook-id", value: id)
            request.headers.add(name: "webhook-timestamp", value: String(timestamp))
            request.headers.add(name: "webhook-signature", value: signature.sign(id: id, timestamp: timestamp, body: body))
            request.body = .bytes(ByteBuffer(data: body))
            let response = try await http.execute(request, timeout: .milliseconds(Int64(configuration.timeout.seconds * 1000)))
            let status = Int(response.status.code)
            let text = String(buffer: try await response.body.collect(upTo: 4096))
            let reason = "\(configuration.url) answered \(status)\(text.isEmpty ? "" : ": \(text.prefix(200))")"
            switch status {
            case 200..<300:
                return .delivered
            case 410:
                let message = "\(name) disabled: \(configuration.url) answered 410 Gone (restart Herald after fixing the endpoint)"
                if disabledReason.withLock({ current in
                    defer { current = current ?? message }
                    return current == nil
                }) {
                    logger.error("\(message)")
                }
                return .failed(reason: message)
            case 429, 500...599:
                let after = response.headers.first(name: "Retry-After").flatMap { Int($0) }.map { Duration.seconds($0) }
                return .retry(after: after, reason: reason)
            default:
                return .failed(reason: reason)
            }
        } catch {
            return .retry(after: nil, reason: "\(configuration.url) did not answer: \(error)")
        }
    }
}
