/// One device token to add to or remove from a provider-side topic (FCM's Instance ID API), so
/// who a Message Hub topic send reaches follows Herald's subscriptions.
public struct TopicMembershipChange: Sendable, Hashable {
    /// Whether the token joins or leaves the topic.
    public enum Action: String, Sendable, Hashable {
        /// Join, or leave.
        case add, remove
    }

    /// Join or leave.
    public var action: Action
    /// The device's provider token (its address key).
    public var token: String
    /// The topic key, which is the provider-side topic's name.
    public var topic: String

    /// A change of `token`'s membership in `topic`.
    public init(_ action: Action, token: String, topic: String) {
        self.action = action
        self.token = token
        self.topic = topic
    }
}

/// What the provider said to one change.
public enum TopicMembershipOutcome: Sendable, Equatable {
    /// Done (or nothing to undo: a removal of a membership the provider no longer has).
    case applied
    /// Never to be retried as it is (an unknown token, too many topics): recorded as refused.
    case refused(reason: String)
    /// Try again later, no sooner than `after` when the provider said so.
    case retry(after: Duration?, reason: String)
}
