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
    /// `msi_key`: the message's id (the notification's, hex).
    public var msiKey: String
    /// `topic_key`: the subject it was posted to (`channel-area-subject` ids).
    public var topicKey: String
    /// The push title.
    public var title: String
    /// The push text.
    public var desc: String
    /// The full message the app shows when opened.
    public var message: String
    /// Alert or Information, as the subject posted it.
    public var distribution: TopicDistribution
    /// Milliseconds since the epoch.
    public var timestamp: Int64
    /// Who posted it: the key's role in words and its name (``Role/sender(keyName:)``).
    public var sender: String

    /// An archived message as stored.
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

/// One page of a topic's archive, newest first.
public struct MessagePage: Sendable, Equatable {
    /// The messages, newest first.
    public var messages: [ArchivedMessage]
    /// Pass as `before` to get the next (older) page; nil on the last page.
    public var next: String?

    /// A page and the cursor to the next.
    public init(messages: [ArchivedMessage], next: String?) {
        self.messages = messages
        self.next = next
    }
}
