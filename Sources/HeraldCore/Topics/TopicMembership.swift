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

/// Which devices a sink keeps in provider-side topics: its providers' devices that name it, or
/// name no sink when it is the first of their provider.
public struct TopicMembershipScope: Sendable, Equatable {
    /// The sink instance keeping membership.
    public var sink: String
    public var providers: [String]
    /// Whether devices that name no sink count as its own (it is the first of their provider).
    public var servesUnnamedDevices: Bool

    /// A scope as the membership worker reads it.
    public init(sink: String, providers: [String], servesUnnamedDevices: Bool) {
        self.sink = sink
        self.providers = providers
        self.servesUnnamedDevices = servesUnnamedDevices
    }
}

/// Herald's record of what each provider-side topic holds, and the difference from what it
/// should hold: every device in scope × every subject its user is subscribed to (Forced
/// subjects for everyone). Reconciling the difference, rather than queueing an event per change,
/// keeps the two equal whichever way a subscription, a device or a subject changed, in any
/// process, and a crash loses nothing: the difference is still there.
public protocol TopicMembershipStore: Sendable {
    /// Up to `limit` changes that would make the record equal to what should be: additions
    /// first, then removals.
    func pendingMembershipChanges(_ scope: TopicMembershipScope, limit: Int) async throws -> [TopicMembershipChange]
    /// Records what the provider answered: an applied or refused addition is recorded (a
    /// refused one is not tried again while it stays wanted), an applied or refused removal
    /// forgotten. Changes to retry are not passed.
    func recordMembership(sink: String, _ settled: [(change: TopicMembershipChange, outcome: TopicMembershipOutcome)]) async throws
    /// Per topic: tokens recorded as members, and refused.
    func membershipCounts(sink: String) async throws -> [String: (members: Int, refused: Int)]
}
