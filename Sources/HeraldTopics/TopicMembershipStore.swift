public import HeraldCore

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
