/// What a sink can do, so the router knows how to address it.
public struct SinkCapabilities: OptionSet, Sendable, Hashable {
    /// The capabilities as bits; combine the named ones rather than writing bits.
    public let rawValue: Int
    /// Capabilities from their bits (`OptionSet`).
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Delivers to devices of the providers the sink declares: one delivery per device, and
    /// only when the user's settings allow push (docs/routing.md). A push sink without
    /// `.topics` gets Message Hub messages as one delivery per subscriber's device.
    public static let push = SinkCapabilities(rawValue: 1 << 0)
    /// Delivers once per user recipient, whatever the user's settings (history, webhooks).
    public static let perUser = SinkCapabilities(rawValue: 1 << 1)
    /// Can send to a provider-side topic (Message Hub messages): one delivery per component.
    public static let topics = SinkCapabilities(rawValue: 1 << 2)
    /// Publishes `broadcast` notifications (the pull feed): one delivery per notification.
    public static let broadcast = SinkCapabilities(rawValue: 1 << 3)
    /// Takes engagement events as well as notifications (``NotificationSink/deliverEvents(_:)``).
    public static let events = SinkCapabilities(rawValue: 1 << 4)
    /// Keeps provider-side topic membership equal to Herald's subscriptions
    /// (``NotificationSink/updateTopicMembership(_:)``), when `topics.manage_membership` is on.
    public static let topicMembership = SinkCapabilities(rawValue: 1 << 5)
    /// Each device names the service it is sent to (a Web Push subscription's push service,
    /// chosen by the user's browser or by the user): one service's failures say nothing of the
    /// sink, so the circuits are kept per service (``NotificationSink/endpoint(of:)``), never
    /// for the sink, which would hold back every other user's pushes.
    public static let endpointPerDevice = SinkCapabilities(rawValue: 1 << 6)
    /// Shows a count on the app's icon (APNs' `badge`, Android's `notification_count`): its
    /// deliveries carry ``Delivery/badge`` when a module keeps badges (``BadgeCounts``).
    public static let badge = SinkCapabilities(rawValue: 1 << 7)
}

/// Who one delivery is for: a user, and for push sinks one of the user's devices; or, for a
/// topic send, the provider-side topic (then `userID` is empty).
public struct DeliveryRecipient: Sendable, Equatable {
    /// The user; empty for a topic send.
    public var userID: String
    /// For a push sink: the device to send to, as registered; nil when it was removed since the
    /// delivery was planned (the engine fails such a push before the sink sees it).
    public var device: Device?
    /// For a topic send: the provider-side topic.
    public var topic: String?

    /// A recipient; give `device` for a push, `topic` for a topic send.
    public init(userID: String, device: Device? = nil, topic: String? = nil) {
        self.userID = userID
        self.device = device
        self.topic = topic
    }
}

/// One notification × one recipient × one sink, as handed to the sink.
public struct Delivery: Sendable, Equatable {
    /// Stable across retries: providers that take an idempotency key (APNs' `apns-id`, a
    /// webhook's `Idempotency-Key`) get one derived from it, so a retried send is recognisable.
    public var id: Int64
    /// The name of the sink this delivery is for.
    public var sink: String
    /// What to send, as accepted.
    public var notification: HeraldNotification
    /// Whom to send it to.
    public var recipient: DeliveryRecipient
    /// The distribution to use for this recipient: an alert becomes information in quiet hours.
    public var distribution: Distribution
    /// 1 for the first try.
    public var attempt: Int
    /// For a sink with ``SinkCapabilities/badge``: the count to show on the app's icon, set as
    /// the delivery is sent; nil leaves the icon as it is.
    public var badge: Int?

    /// A delivery as the engine hands it over (tests and dry runs build their own).
    public init(
        id: Int64, sink: String, notification: HeraldNotification, recipient: DeliveryRecipient, distribution: Distribution, attempt: Int,
        badge: Int? = nil
    ) {
        self.id = id
        self.sink = sink
        self.notification = notification
        self.recipient = recipient
        self.distribution = distribution
        self.attempt = attempt
        self.badge = badge
    }
}

/// What happened to one delivery.
public enum DeliveryOutcome: Sendable, Equatable {
    /// The provider (or the sink's own store) took it.
    case delivered
    /// A transient failure: try again, no sooner than `after` when the provider said so.
    /// `scope` says what the failure is about; by default the provider (it may be down).
    case retry(after: Duration?, reason: String, scope: OutcomeScope = .provider)
    /// A permanent failure (for example a payload the provider refuses): never retried.
    case failed(reason: String, scope: OutcomeScope = .message)
    /// The provider says the token is gone: the device is removed at once.
    case recipientGone(reason: String)

    /// Whom the outcome is about; nil for a delivery that went through.
    public var scope: OutcomeScope? {
        switch self {
        case .delivered: nil
        case .retry(_, _, let scope), .failed(_, let scope): scope
        case .recipientGone: .recipient
        }
    }
}

/// How far one provider answer reaches (docs/sinks.md, "Outcomes and their scope"). A sink says
/// it with each failure, so that one user's address can never pass for the operator's fault:
/// anyone who may register a device chooses its address, and with Web Push its whole endpoint.
public enum OutcomeScope: String, Sendable, Equatable, CaseIterable {
    /// This device or address: its delivery fails (or the device goes); the sink is fine.
    case recipient
    /// This message: retried on its own backoff, other messages keep flowing.
    case message
    /// The provider's service is down or overloaded for everyone: what a circuit counts.
    case provider
    /// The operator's key or account was refused: the sink reports itself degraded. Only an
    /// answer that proves it (the provider Herald was configured for refusing the key, on its
    /// own token endpoint or on several distinct recipients with no success between) says so.
    case credentials

    /// Whether a failure of this scope says something about the provider as a whole, and so
    /// may open the sink's circuit.
    public var countsAgainstProvider: Bool { self == .provider || self == .credentials }
}

/// Where a sink hands over outcomes as they become known
/// (``NotificationSink/deliver(_:reporting:)``): each is the index of a delivery in the batch
/// and what happened to it.
public struct DeliveryReporter: Sendable {
    private let take: @Sendable ([(index: Int, outcome: DeliveryOutcome)]) async -> Void

    /// A reporter that passes each report to `take` (the engine records them).
    public init(_ take: @escaping @Sendable ([(index: Int, outcome: DeliveryOutcome)]) async -> Void) {
        self.take = take
    }

    /// Reports these outcomes, each with its delivery's index in the batch; report each
    /// delivery once, in any order and in as many calls as suits the sink.
    public func callAsFunction(_ outcomes: [(index: Int, outcome: DeliveryOutcome)]) async {
        await take(outcomes)
    }
}

/// Which device providers a push sink delivers to.
public enum DeviceProviders: Sendable, Equatable {
    /// Devices of these providers only (`["fcm"]`, `["apns"]`).
    case only(Set<String>)
    /// Every device, whatever its provider: development sinks that print instead of sending.
    case all

    /// Whether devices of `provider` are served.
    public func contains(_ provider: String) -> Bool {
        switch self {
        case .all: true
        case .only(let names): names.contains(provider)
        }
    }
}

/// A delivery plugin: a name, what it can do, and one batched call. Everything else has a
/// default, so the smallest sink is a few lines:
///
/// ```swift
/// struct PagerSink: NotificationSink {
///     let name = "pager"
///     let capabilities: SinkCapabilities = .perUser
///     func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] {
///         batch.map { _ in .delivered }
///     }
/// }
/// ```
/// `deliver` returns exactly one outcome per delivery, in order, and does not throw: a sink
/// turns its own failures into `.retry` or `.failed` so nothing is lost. Deliveries are
/// at-least-once: a retried delivery keeps its `id`, so a receiver can drop duplicates.
///
/// A sink that holds resources (an HTTP client's connections) conforms to ``ReleasingSink``
/// instead and implements its `shutdown()`: Herald runs it in its service group, and it
/// releases them once graceful shutdown begins, after the delivery engine has stopped. A sink
/// is built from its section of the configuration by a ``SinkFactory``.
public protocol NotificationSink: Sendable {
    var name: String { get }
    var capabilities: SinkCapabilities { get }
    /// For a push sink: the device providers it delivers to. The router hands it only those
    /// devices, and of those only the ones registered for it (``Device/app`` is its name) or,
    /// when a device names no sink, the ones it is the first configured sink for. The default
    /// is none.
    var providers: DeviceProviders { get }
    func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome]
    /// Delivers `batch` and hands each outcome to `report` as soon as it is known (each index
    /// of `batch` once; the engine retries any never reported). The engine records every
    /// report as it comes, so a send that takes its whole timeout holds back only its own
    /// delivery, not the rest of the batch: for sinks whose sends take very different times
    /// (devices that each name their own service). The default calls ``deliver(_:)`` and
    /// reports everything when it returns; ``deliverConcurrently(_:limit:reportingEvery:to:_:)``
    /// reports as it goes.
    func deliver(_ batch: [Delivery], reporting report: DeliveryReporter) async
    /// Refuses, when it is accepted, a notification this sink could never deliver (a payload
    /// over the provider's limit, a reserved key), so the sender gets a 422 before anything is
    /// stored. The default accepts everything.
    func validate(_ notification: HeraldNotification) throws
    /// The same check for a Message Hub message this sink will send to a provider-side topic
    /// (sinks with `.topics`; the provider's topic limits apply). The default accepts it.
    func validateTopicSend(_ notification: HeraldNotification, topic: String) throws
    /// Checks a device a user registers for one of ``providers`` before it is stored, and may
    /// fill in defaults (an APNs environment) or choose the address's key. Throw
    /// `HeraldError.invalidField(registration.addressField, …)` for an address the provider
    /// would never accept. The default checks a token or a bounded object.
    func prepare(_ registration: inout DeviceRegistration) throws
    /// After ``prepare(_:)``, at registration only (not when a device is removed): checks that
    /// need I/O, such as what an endpoint's host name resolves to. Throw as ``prepare(_:)``
    /// does. The default admits every device.
    func admit(_ registration: DeviceRegistration) async throws
    /// Asks the provider to validate these deliveries without sending them (FCM's
    /// `validate_only`). One result per delivery; the default answers `.unsupported`.
    func dryRun(_ batch: [Delivery]) async -> [DryRunResult]
    /// Adds device tokens to and removes them from provider-side topics (sinks with
    /// `.topicMembership`), one outcome per change, in order. The default refuses them.
    func updateTopicMembership(_ changes: [TopicMembershipChange]) async -> [TopicMembershipOutcome]
    /// Takes engagement events (sinks with the `.events` capability), one outcome per event.
    /// The default fails them: the sink does not take events.
    func deliverEvents(_ events: [EngagementEvent]) async -> [DeliveryOutcome]
    /// Whether the sink can deliver now, for `herald sinks`, `/health/sinks`, `/metrics` and
    /// the portal. A sink reports `.degraded` with a reason an operator can act on (wrong
    /// credentials, an endpoint that is gone); it never makes the server unready.
    func health() async -> SinkHealth
    /// Rules the sink brings with its configuration (a webhook's `match`): which notifications
    /// reach it besides those an operator's `routing` rules send. The default is none.
    var routingRules: [RoutingRule] { get }
    /// For a sink with `.endpointPerDevice`: the service one delivery goes to (a push service's
    /// origin), which its circuit is kept for, so one failing service holds back only its own
    /// deliveries. nil (the default) keeps them under one circuit for every endpoint the sink
    /// cannot tell apart.
    func endpoint(of delivery: Delivery) -> String?
    /// The channel the sink delivers on (docs/routing.md, "Channels and preferences"), which
    /// users' preferences name; `sinks.<name>.channel` and `user_facing` override it. The
    /// default: `in_app` for history, `push` for a push sink, `feed` for a broadcast sink, and
    /// otherwise an operator's own sink, which preferences never remove.
    var channel: SinkChannel { get }
}

extension NotificationSink {
    /// No providers: a sink without `.push` serves no device.
    public var providers: DeviceProviders { .only([]) }

    /// ``SinkChannel/byDefault(name:capabilities:)``.
    public var channel: SinkChannel { SinkChannel.byDefault(name: name, capabilities: capabilities) }

    /// Reports all of ``deliver(_:)``'s outcomes at once, when it returns.
    public func deliver(_ batch: [Delivery], reporting report: DeliveryReporter) async {
        let outcomes = await deliver(batch)
        // A wrong number of outcomes says nothing of which is which: none is reported, and the
        // engine retries them all.
        guard outcomes.count == batch.count else { return }
        await report(outcomes.enumerated().map { ($0.offset, $0.element) })
    }

    /// Accepts every notification.
    public func validate(_ notification: HeraldNotification) throws {}

    /// Accepts every topic send.
    public func validateTopicSend(_ notification: HeraldNotification, topic: String) throws {}

    /// Checks the fields every registration has (``DeviceRegistration/validateCommonFields()``).
    public func prepare(_ registration: inout DeviceRegistration) throws {
        try registration.validateCommonFields()
    }

    /// Admits every device.
    public func admit(_ registration: DeviceRegistration) async throws {}

    /// Refuses every change: the sink keeps no provider-side topics.
    public func updateTopicMembership(_ changes: [TopicMembershipChange]) async -> [TopicMembershipOutcome] {
        changes.map { _ in .refused(reason: "sink '\(name)' does not keep topic membership") }
    }

    /// Answers `.unsupported` for each delivery.
    public func dryRun(_ batch: [Delivery]) async -> [DryRunResult] {
        batch.map { _ in .unsupported }
    }

    /// Fails every event: the sink does not take them.
    public func deliverEvents(_ events: [EngagementEvent]) async -> [DeliveryOutcome] {
        events.map { _ in .failed(reason: "sink '\(name)' does not take engagement events") }
    }

    /// Always `.ok`.
    public func health() async -> SinkHealth { .ok }

    /// No rules of its own.
    public var routingRules: [RoutingRule] { [] }

    /// One circuit for the whole sink.
    public func endpoint(of delivery: Delivery) -> String? { nil }

    /// A short description for `herald sinks` and logs.
    public var summary: String {
        var parts: [String] = []
        if capabilities.contains(.push) {
            switch providers {
            case .all: parts.append("push to every provider")
            case .only(let names): parts.append("push (\(names.sorted().joined(separator: ", ")))")
            }
        }
        if capabilities.contains(.topics) { parts.append("topics") }
        if capabilities.contains(.perUser) { parts.append("per user") }
        if capabilities.contains(.broadcast) { parts.append("broadcast") }
        if capabilities.contains(.events) { parts.append("events") }
        return parts.joined(separator: ", ")
    }
}
