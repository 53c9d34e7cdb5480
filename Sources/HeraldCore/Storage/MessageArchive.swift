/// Who a fan-out reaches, and how their deliveries are planned.
public enum FanOutPlan: Sendable {
    /// Every subscriber gets a history row, whatever their settings (Message Hub messages),
    /// written in the accepting transaction and recorded as a delivered history delivery.
    case historyOnly
    /// As ``historyOnly``, and each subscriber who has devices also gets the deliveries the
    /// closure plans (a Message Hub message for push sinks without provider-side topics).
    case historyAndDevices(@Sendable (RecipientContext) -> [PlannedDelivery])
    /// Each subscriber's deliveries come from the router, so their settings apply.
    case route(@Sendable (RecipientContext) -> [PlannedDelivery])
}

/// A Message Hub message as archived (openapi.yaml `GET /message`).
public struct ArchivedMessage: Sendable, Equatable {
    public var msiKey: String
    public var topicKey: String
    public var title: String
    public var desc: String
    public var message: String
    public var distribution: TopicDistribution
    /// Milliseconds since the epoch.
    public var timestamp: Int64
    public var sender: String

    public init(
        msiKey: String, topicKey: String, title: String, desc: String, message: String, distribution: TopicDistribution, timestamp: Int64, sender: String
    ) {
        self.msiKey = msiKey
        self.topicKey = topicKey
        self.title = title
        self.desc = desc
        self.message = message
        self.distribution = distribution
        self.timestamp = timestamp
        self.sender = sender
    }
}

public struct MessagePage: Sendable, Equatable {
    public var messages: [ArchivedMessage]
    public var next: String?

    public init(messages: [ArchivedMessage], next: String?) {
        self.messages = messages
        self.next = next
    }
}
