/// What a sink can do, so the router knows how to address it.
public struct SinkCapabilities: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Delivers to a device token: one delivery per device, and only when the user's settings
    /// allow push (SPEC §4 step 2).
    public static let push = SinkCapabilities(rawValue: 1 << 0)
    /// Delivers once per user recipient, whatever the user's settings (history, webhooks).
    public static let perUser = SinkCapabilities(rawValue: 1 << 1)
    /// Can send to a provider-side topic (Message Hub messages): one delivery per component.
    public static let topics = SinkCapabilities(rawValue: 1 << 2)
    /// Publishes `broadcast` notifications (the pull feed): one delivery per notification.
    public static let broadcast = SinkCapabilities(rawValue: 1 << 3)
}

/// Who one delivery is for: a user, and for push sinks one of the user's devices; or, for a
/// topic send, the provider-side topic (then `userID` is empty).
public struct DeliveryRecipient: Sendable, Equatable {
    public var userID: String
    public var device: Device?
    public var topic: String?

    public init(userID: String, device: Device? = nil, topic: String? = nil) {
        self.userID = userID
        self.device = device
        self.topic = topic
    }
}

/// One notification × one recipient × one sink, as handed to the sink.
public struct Delivery: Sendable, Equatable {
    public var id: Int64
    /// The name of the sink this delivery is for.
    public var sink: String
    public var notification: HeraldNotification
    public var recipient: DeliveryRecipient
    /// The distribution to use for this recipient: an alert becomes information in quiet hours.
    public var distribution: Distribution
    /// 1 for the first try.
    public var attempt: Int

    public init(id: Int64, sink: String, notification: HeraldNotification, recipient: DeliveryRecipient, distribution: Distribution, attempt: Int) {
        self.id = id
        self.sink = sink
        self.notification = notification
        self.recipient = recipient
        self.distribution = distribution
        self.attempt = attempt
    }
}

/// What happened to one delivery.
public enum DeliveryOutcome: Sendable, Equatable {
    case delivered
    /// A transient failure: try again, no sooner than `after` when the provider said so.
    case retry(after: Duration?, reason: String)
    /// A permanent failure (for example a payload the provider refuses): never retried.
    case failed(reason: String)
    /// The provider says the token is gone: the device is removed at once.
    case recipientGone(reason: String)
}

/// A delivery plugin. The whole contract: a name, what it can do, and one batched call.
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
/// turns its own failures into `.retry` or `.failed` so nothing is lost.
public protocol NotificationSink: Sendable {
    var name: String { get }
    var capabilities: SinkCapabilities { get }
    func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome]
    /// Refuses, when it is accepted, a notification this sink could never deliver (a payload
    /// over the provider's limit, a reserved key), so the sender gets a 422 before anything is
    /// stored. The default accepts everything.
    func validate(_ notification: HeraldNotification) throws
}

extension NotificationSink {
    public func validate(_ notification: HeraldNotification) throws {}

    /// A short description for `herald sinks` and logs.
    public var summary: String {
        capabilities.contains(.push) ? "push (one delivery per device)" : "per user"
    }
}
