import AsyncHTTPClient
import CoreMetrics
public import Foundation
public import HeraldCore
import HeraldSinkHTTP
public import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import Synchronization

/// How the FCM sink reaches Google (or the local emulator).
public struct FCMConfiguration: Sendable {
    /// The Google service account the sink signs its token requests with.
    public var account: ServiceAccount
    /// `https://fcm.googleapis.com` by default.
    public var endpoint: String
    /// Requests in flight at once, across all batches.
    public var maxConcurrency: Int
    /// HTTP/2 connections to an `https` endpoint, sends spread over them in turn; nil for one
    /// per 100 of `maxConcurrency` (FCM allows 100 streams on one, and one connection would
    /// hold any higher concurrency to 100 sends in flight). An `http` endpoint speaks HTTP/1.1
    /// with a connection per request in flight and ignores it.
    public var connections: Int?
    /// How long one send may take before it counts as unanswered.
    public var requestTimeout: Duration
    /// How `data.timestamp` is written (Herald's `timestamps` setting).
    public var timestamps: TimestampStyle = .pong
    /// Extra certificates (PEM) to trust for `https` endpoints: the emulator's. Verification
    /// stays on.
    public var caFile: String?
    /// The Instance ID API that keeps topic membership, `https://iid.googleapis.com` by default.
    public var iidEndpoint = "https://iid.googleapis.com" {
        didSet { while iidEndpoint.hasSuffix("/") { iidEndpoint.removeLast() } }
    }

    /// A configuration: FCM's own endpoint unless an emulator's is given, with its limits.
    public init(account: ServiceAccount, endpoint: String = "https://fcm.googleapis.com", maxConcurrency: Int = 64, requestTimeout: Duration = .seconds(15)) {
        self.account = account
        var base = endpoint
        while base.hasSuffix("/") { base.removeLast() }
        self.endpoint = base
        self.maxConcurrency = maxConcurrency
        self.requestTimeout = requestTimeout
    }
}

/// Push through Firebase Cloud Messaging HTTP v1: one message per device token, and Message
/// Hub messages as topic sends. Serves devices of the provider `fcm`.
///
/// A `Service`: in Herald's service group it closes the HTTP client it owns at shutdown.
public final class FCMSink: ReleasingSink {
    /// The device provider this sink serves.
    public static let provider = "fcm"

    public let name: String
    public let capabilities: SinkCapabilities = [.push, .topics, .topicMembership, .badge]
    public let providers: DeviceProviders = .only([FCMSink.provider])

    let configuration: FCMConfiguration
    let connections: SinkHTTPClients
    let tokens: FCMAccessTokenProvider
    private let limiter: ConcurrencyLimiter
    let logger: Logger
    let clock: @Sendable () -> Date
    let counters = Mutex<[String: Int]>([:])
    /// Why the credentials look wrong, until a send succeeds again.
    let credentialFault = Mutex<String?>(nil)
    /// When a send last succeeded: proof that these credentials work.
    private let lastSuccess = Mutex<Date?>(nil)
    /// How recent a success must be for SENDER_ID_MISMATCH to mean the token, not the credentials.
    public static let credentialProofWindow: TimeInterval = 600

    /// A client whose connection pool does not cap concurrency below `maxConcurrency`:
    /// `HTTPClient.shared` keeps 8 HTTP/1.1 connections per host, which would serialise sends
    /// to an HTTP/1.1 endpoint (the emulator, a proxy). Over `https` it offers HTTP/2 (ALPN),
    /// so sends share its one connection as concurrent streams.
    public static func makeHTTPClient(trusting caFile: String? = nil) -> HTTPClient {
        SinkHTTPClients.makeClient(maxConcurrency: 1_024, trusting: caFile)
    }

    /// - Parameters:
    ///   - name: the sink instance's name (`sinks.<name>`).
    ///   - configuration: the project, credentials and limits.
    ///   - http: a client the caller owns and shuts down, which then carries every send (one
    ///     HTTP/2 connection over `https`); by default the sink makes its own,
    ///     ``FCMConfiguration/connections`` of them over `https`, and closes them when
    ///     ``run()`` ends (or ``shutdown()`` is called).
    ///   - logger: where refusals and failures are reported.
    ///   - metrics: where token refreshes and sends are counted.
    ///   - clock: the time tokens and retries are judged by (tests move it).
    public init(
        name: String = "fcm", configuration: FCMConfiguration, http: HTTPClient? = nil, logger: Logger = Logger(label: "herald.fcm"),
        metrics: HeraldMetrics = HeraldMetrics(), clock: @escaping @Sendable () -> Date = { Date() }
    ) async throws {
        let connections =
            http.map { SinkHTTPClients(borrowing: $0) }
            ?? SinkHTTPClients(
                endpoint: configuration.endpoint, maxConcurrency: configuration.maxConcurrency, connections: configuration.connections,
                trusting: configuration.caFile)
        do {
            self.tokens = try await FCMAccessTokenProvider(
                account: configuration.account, http: connections.primary, timeout: configuration.requestTimeout, clock: clock,
                onRefresh: {
                    Counter(label: "herald_fcm_token_refreshes_total", dimensions: [("sink", name)], factory: metrics.factory).increment()
                }
            )
        } catch {
            await connections.shutdown()
            throw error
        }
        self.name = name
        self.configuration = configuration
        self.connections = connections
        self.limiter = ConcurrencyLimiter(limit: configuration.maxConcurrency)
        self.logger = logger
        self.clock = clock
    }

    /// Closes the HTTP clients the sink owns; the sink is not used afterwards.
    public func shutdown() async {
        await connections.shutdown()
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

    public func validateTopicSend(_ notification: HeraldNotification, topic: String) throws {
        try FCMMessageBuilder.validate(Self.topicMessage(notification, topic: topic))
    }

    /// FCM registration tokens are strings.
    public func prepare(_ registration: inout DeviceRegistration) throws {
        guard registration.address.token != nil else {
            throw HeraldError.invalidField(registration.addressField, "must be an FCM registration token (a string)")
        }
        try registration.validateCommonFields()
    }

    public func health() async -> SinkHealth {
        credentialFault.withLock { $0 }.map { .degraded(reason: $0) } ?? .ok
    }

    public func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] {
        let results = await send(batch, validateOnly: false)
        let now = clock()
        if results.contains(.sent) {
            lastSuccess.withLock { $0 = now }
            credentialFault.withLock { $0 = nil }
        }
        // SENDER_ID_MISMATCH means "this token belongs to another sender". It is the token's
        // fault only when these credentials have just delivered to another token; otherwise the
        // credentials are the likelier culprit (docs/fcm.md): keep the device, retry later, and
        // report the sink degraded. A credential fault never deletes devices.
        let proven = lastSuccess.withLock { $0.map { now.timeIntervalSince($0) < Self.credentialProofWindow } ?? false }
        let mismatches = results.filter { if case .senderMismatch = $0 { true } else { false } }.count
        if mismatches > 0 && !proven {
            let reason =
                "FCM answered SENDER_ID_MISMATCH and sink '\(name)' has not delivered to any token recently: its credentials probably belong to another Firebase project; devices are kept"
            logger.error("\(reason)")
            credentialFault.withLock { $0 = reason }
        }
        return results.map { result in
            if !proven, case .senderMismatch(let reason) = result {
                return .retry(after: nil, reason: "\(reason) (check the credentials of sink '\(name)'; device kept)", scope: .credentials)
            }
            return Self.outcome(result)
        }
    }

    /// FCM's dry run: each message is sent with `validate_only`, so FCM checks it (and the
    /// token) without delivering anything.
    public func dryRun(_ batch: [Delivery]) async -> [DryRunResult] {
        await send(batch, validateOnly: true).map { result in
            switch result {
            case .sent: .valid
            case .unregistered(let reason), .senderMismatch(let reason), .payloadFault(let reason), .unauthorized(let reason), .refused(let reason):
                .invalid(reason: reason)
            case .transient(_, let reason), .unanswered(let reason): .invalid(reason: reason)
            }
        }
    }

    /// Sends (or validates) every delivery of a batch concurrently, within `maxConcurrency`.
    private func send(_ batch: [Delivery], validateOnly: Bool) async -> [FCMResult] {
        await withTaskGroup(of: (Int, FCMResult).self) { group in
            for (index, delivery) in batch.enumerated() {
                group.addTask {
                    if let topic = delivery.recipient.topic {
                        let message = Self.topicComponent(of: delivery, topic: topic)
                        // No answer to a topic send may mean it is already fanning out: never retry blindly.
                        return (index, await self.limiter.run { await self.send(message, blindRetry: false, validateOnly: validateOnly) })
                    }
                    guard let token = delivery.recipient.device?.token else {
                        return (index, .refused("no device token"))
                    }
                    let message = FCMMessageBuilder.tokenMessage(for: delivery, token: token, timestamps: self.configuration.timestamps)
                    return (index, await self.limiter.run { await self.send(message, blindRetry: true, validateOnly: validateOnly) })
                }
            }
            var results = [FCMResult](repeating: .refused("not sent"), count: batch.count)
            for await (index, result) in group { results[index] = result }
            return results
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
            timestamp: Timestamp.microseconds(notification.timestamp) / 1000
        )
    }

    static func outcome(_ result: FCMResult) -> DeliveryOutcome {
        switch result {
        case .sent: .delivered
        case .unregistered(let reason), .senderMismatch(let reason): .recipientGone(reason: reason)
        case .payloadFault(let reason), .refused(let reason): .failed(reason: reason, scope: .message)
        // FCM refused the access token Herald got with the operator's service account.
        case .unauthorized(let reason): .retry(after: nil, reason: reason, scope: .credentials)
        // FCM answered 429 or 5xx for this message (a provider under load does this while most of
        // the service works): its own backoff, never the circuit (docs/durability.md).
        case .transient(let after, let reason): .retry(after: after, reason: reason, scope: .message)
        case .unanswered(let reason): .retry(after: nil, reason: reason, scope: .provider)
        }
    }

    /// One POST to messages:send (``authorizedPOST(_:json:headers:upTo:)`` retries a 401 once).
    /// - Parameter blindRetry: whether a send that got no answer may be retried later.
    func send(_ message: FCMMessage, blindRetry: Bool, validateOnly: Bool = false) async -> FCMResult {
        let result: FCMResult
        do {
            let answer = try await authorizedPOST(
                "\(configuration.endpoint)/v1/projects/\(configuration.account.projectID)/messages:send",
                json: FCMSendRequest(message: message, validateOnly: validateOnly ? true : nil).json, upTo: 1 << 20
            )
            result = FCMResult.classify(status: answer.status, body: answer.body, retryAfter: answer.headers.first(name: "Retry-After"), now: clock())
        } catch let error as FCMError {
            // No access token could be had with the operator's service account.
            result = .unauthorized(error.description)
        } catch {
            result =
                blindRetry
                ? .unanswered("no answer from FCM: \(error)")
                : .refused("no answer from FCM for a topic send (not retried: it may already be fanning out): \(error)")
        }
        counters.withLock { $0[result.counterName, default: 0] += 1 }
        return result
    }

    /// POSTs a JSON body with the sink's OAuth access token (FCM sends and Instance ID calls
    /// share it); a 401 invalidates the token and tries once more with a fresh one.
    /// - Throws: ``FCMError`` when no access token can be had (recorded as the sink's credential
    ///   fault: the credentials, not the devices, are at fault), or the HTTP client's error when
    ///   no answer came.
    func authorizedPOST(
        _ url: String, json body: Data, headers extra: [(String, String)] = [], upTo limit: Int
    ) async throws -> (status: Int, headers: HTTPHeaders, body: Data) {
        var refreshed = false
        while true {
            let accessToken: String
            do {
                accessToken = try await tokens.token()
            } catch let error as FCMError {
                credentialFault.withLock { $0 = "cannot get an access token for sink '\(name)': \(error.description)" }
                throw error
            }
            var headers = HTTPHeaders([("Authorization", "Bearer \(accessToken)"), ("Content-Type", "application/json")])
            headers.add(contentsOf: extra)
            let answer = try await connections.next().post(
                url, headers: headers, body: ByteBuffer(data: body), keep: limit,
                timeout: configuration.requestTimeout)
            if answer.status == 401 && !refreshed {
                tokens.invalidate(accessToken)
                refreshed = true
                continue
            }
            return (answer.status, answer.headers, Data(buffer: answer.body))
        }
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
        case .unanswered: "unanswered"
        case .refused: "refused"
        }
    }
}
