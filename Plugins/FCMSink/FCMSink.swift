import AsyncHTTPClient
public import Foundation
public import HeraldCore
public import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import Synchronization

/// How the FCM sink reaches Google (or the local emulator).
public struct FCMConfiguration: Sendable {
    public var account: ServiceAccount
    /// `https://fcm.googleapis.com` by default.
    public var endpoint: String
    /// Requests in flight at once, across all batches.
    public var maxConcurrency: Int
    /// How long one send may take before it counts as unanswered.
    public var requestTimeout: Duration

    public init(account: ServiceAccount, endpoint: String = "https://fcm.googleapis.com", maxConcurrency: Int = 64, requestTimeout: Duration = .seconds(15)) {
        self.account = account
        var base = endpoint
        while base.hasSuffix("/") { base.removeLast() }
        self.endpoint = base
        self.maxConcurrency = maxConcurrency
        self.requestTimeout = requestTimeout
    }
}

/// Push through Firebase Cloud Messaging HTTP v1: one message per device token.
public final class FCMSink: NotificationSink {
    public let name = "fcm"
    public let capabilities: SinkCapabilities = [.push, .topics]

    private let configuration: FCMConfiguration
    private let http: HTTPClient
    private let tokens: FCMAccessTokenProvider
    private let limiter: ConcurrencyLimiter
    private let logger: Logger
    private let clock: @Sendable () -> Date
    private let counters = Mutex<[String: Int]>([:])

    /// A client whose connection pool does not cap concurrency below `maxConcurrency`:
    /// `HTTPClient.shared` keeps 8 HTTP/1.1 connections per host, which would serialise sends
    /// to an HTTP/1.1 endpoint (the emulator, a proxy). It lives as long as the process.
    public static let defaultHTTPClient: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 1_024
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    public init(
        configuration: FCMConfiguration, http: HTTPClient = FCMSink.defaultHTTPClient, logger: Logger = Logger(label: "herald.fcm"),
        metrics: HeraldMetrics = HeraldMetrics(), clock: @escaping @Sendable () -> Date = { Date() }
    ) async throws {
        self.configuration = configuration
        self.http = http
        self.tokens = try await FCMAccessTokenProvider(
            account: configuration.account, http: http, clock: clock, onRefresh: { metrics.accessTokenRefreshed(sink: "fcm") }
        )
        self.limiter = ConcurrencyLimiter(limit: configuration.maxConcurrency)
        self.logger = logger
        self.clock = clock
    }

    /// Access-token requests made so far.
    public var tokenRequests: Int {
        get async { await tokens.refreshCount }
    }

    /// Messages sent, per result class (`sent`, `unregistered`, `transient`, …).
    public var results: [String: Int] { counters.withLock { $0 } }

    public func validate(_ notification: HeraldNotification) throws {
        try FCMMessageBuilder.validate(notification)
    }

    public func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] {
        let results = await withTaskGroup(of: (Int, FCMResult).self) { group in
            for (index, delivery) in batch.enumerated() {
                group.addTask {
                    if let topic = delivery.recipient.topic {
                        let message = Self.topicComponent(of: delivery, topic: topic)
                        // No answer to a topic send may mean it is already fanning out: never retry blindly.
                        return (index, await self.limiter.run { await self.send(message, blindRetry: false) })
                    }
                    guard let token = delivery.recipient.device?.fcmToken else {
                        return (index, .refused("no device token"))
                    }
                    let message = FCMMessageBuilder.tokenMessage(for: delivery, token: token)
                    return (index, await self.limiter.run { await self.send(message, blindRetry: true) })
                }
            }
            var results = [FCMResult](repeating: .refused("not sent"), count: batch.count)
            for await (index, result) in group { results[index] = result }
            return results
        }
        // SENDER_ID_MISMATCH for every token of a batch means the credentials are wrong, not the
        // tokens: keep the devices, retry later, and say so loudly (SPEC §10).
        let mismatches = results.filter { if case .senderMismatch = $0 { true } else { false } }.count
        let credentialsFault = batch.count > 1 && mismatches == batch.count
        if credentialsFault {
            logger.error("FCM answered SENDER_ID_MISMATCH for all \(batch.count) tokens of a batch: fcm.credentials probably belong to another Firebase project; devices are kept")
        }
        return results.map { result in
            if credentialsFault, case .senderMismatch(let reason) = result {
                return .retry(after: nil, reason: "\(reason) (every token in the batch: check fcm.credentials; devices kept)")
            }
            return Self.outcome(result)
        }
    }

    /// Sends a Message Hub message to its FCM topic: one outcome per component. A topic send
    /// that gets no answer may already be fanning out, so only an explicit 429/5xx is retried.
    public func sendToTopic(_ message: FCMTopicMessage) async -> [DeliveryOutcome] {
        var outcomes: [DeliveryOutcome] = []
        for component in FCMMessageBuilder.topicMessages(message) {
            outcomes.append(Self.outcome(await limiter.run { await self.send(component, blindRetry: false) }))
        }
        return outcomes
    }

    /// The topic component a delivery stands for: its distribution names the component — the
    /// visible notification (`alert`) or the silent data message (`information`).
    static func topicComponent(of delivery: Delivery, topic: String) -> FCMMessage {
        let message = topicMessage(delivery.notification, topic: topic)
        return delivery.distribution == .alert ? FCMMessageBuilder.topicNotification(message) : FCMMessageBuilder.topicData(message)
    }

    /// A Message Hub message stored as a notification: `id` is the msi_key, `body` the desc,
    /// and `data["message"]` the message text.
    public static func topicMessage(_ notification: HeraldNotification, topic: String) -> FCMTopicMessage {
        FCMTopicMessage(
            msiKey: notification.id.hex, topicKey: topic, distribution: notification.distribution, title: notification.title,
            desc: notification.body, message: notification.data["message"] ?? "",
            timestamp: Int64((notification.timestamp.timeIntervalSince1970 * 1000).rounded())
        )
    }

    static func outcome(_ result: FCMResult) -> DeliveryOutcome {
        switch result {
        case .sent: .delivered
        case .unregistered(let reason), .senderMismatch(let reason): .recipientGone(reason: reason)
        case .payloadFault(let reason), .refused(let reason): .failed(reason: reason)
        case .unauthorized(let reason): .retry(after: nil, reason: reason)
        case .transient(let after, let reason): .retry(after: after, reason: reason)
        }
    }

    /// One POST to messages:send; a 401 refreshes the access token and tries once more.
    /// - Parameter blindRetry: whether a send that got no answer may be retried later.
    func send(_ message: FCMMessage, blindRetry: Bool, refreshed: Bool = false) async -> FCMResult {
        let result: FCMResult
        do {
            let accessToken = try await tokens.token()
            var request = HTTPClientRequest(url: "\(configuration.endpoint)/v1/projects/\(configuration.account.projectID)/messages:send")
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(accessToken)")
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(data: try JSONEncoder().encode(FCMSendRequest(message: message))))
            let response = try await http.execute(request, timeout: .milliseconds(Int64(configuration.requestTimeout.seconds * 1000)))
            let body = try await response.body.collect(upTo: 1 << 20)
            let classified = FCMResult.classify(status: Int(response.status.code), body: Data(buffer: body), retryAfter: response.headers.first(name: "Retry-After"), now: clock())
            if case .unauthorized = classified, !refreshed {
                await tokens.invalidate(accessToken)
                return await send(message, blindRetry: blindRetry, refreshed: true)
            }
            result = classified
        } catch let error as FCMError {
            result = .transient(after: nil, reason: error.description)
        } catch {
            result = blindRetry
                ? .transient(after: nil, reason: "no answer from FCM: \(error)")
                : .refused("no answer from FCM for a topic send (not retried: it may already be fanning out): \(error)")
        }
        counters.withLock { $0[result.counterName, default: 0] += 1 }
        return result
    }
}

extension FCMResult {
    var counterName: String {
        switch self {
        case .sent: "sent"
        case .unregistered: "unregistered"
        case .senderMismatch: "sender_mismatch"
        case .payloadFault: "payload_fault"
        case .unauthorized: "unauthorized"
        case .transient: "transient"
        case .refused: "refused"
        }
    }
}
