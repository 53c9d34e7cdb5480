public import Foundation

/// A reason to use, or not use, one sink for one recipient, contributed by a module (docs/
/// architecture.md, "Extension points"): user settings are one, and a module adds its own
/// (preferences, a topic's Forced rule, frequency caps) without editing the router.
///
/// Policies run on every recipient of every notification, inside the accepting transaction:
/// pure and quick, no I/O. What a policy needs to know of the user is in ``RecipientContext``.
public protocol RoutingPolicy: Sendable {
    /// Names the policy in explanations (`settings`, `preferences`).
    var name: String { get }
    /// What the policy says of `sink` for this recipient, or nil for no opinion.
    func verdict(on sink: NotificationRouter.Sink, for notification: HeraldNotification, recipient: RecipientContext, at now: Date) -> RoutingVerdict?
}

/// One policy's word on one sink for one recipient. Combined: a sink is used when some policy
/// requires it, else when none excludes it; so an opt-out beats the default and a critical type
/// (`.required`) beats an opt-out.
public enum RoutingVerdict: Sendable, Equatable {
    /// Use the sink, unless another policy excludes it.
    case included(because: String)
    /// Do not use the sink, unless another policy requires it.
    case excluded(because: String)
    /// Use the sink whatever other policies say.
    case required(because: String)

    /// The reason given.
    public var reason: String {
        switch self {
        case .included(let reason), .excluded(let reason), .required(let reason): reason
        }
    }
}

/// Why a sink is used or not for one recipient: every reason that counted, in the order they
/// were given (the operator's rules first, then each policy).
public struct RoutingDecision: Sendable, Equatable {
    /// One verdict, and who gave it.
    public struct Reason: Sendable, Equatable {
        /// Who gave it: `rules` (routing rules and the sink's own), `devices`, or a policy's name.
        public var source: String
        /// What it said, with its reason.
        public var verdict: RoutingVerdict

        /// A reason given by `source`.
        public init(source: String, verdict: RoutingVerdict) {
            self.source = source
            self.verdict = verdict
        }
    }

    /// The sink decided on.
    public var sink: String
    /// Whether the recipient gets a delivery through it.
    public var used: Bool
    /// For a push sink used: the devices it sends to.
    public var devices: [ObjectID]
    /// The distribution the recipient gets (an alert is information in quiet hours).
    public var distribution: Distribution
    /// Every reason that counted, in the order given.
    public var reasons: [Reason]

    /// A decision, as ``NotificationRouter/explain(_:for:at:)`` makes it.
    public init(sink: String, used: Bool, devices: [ObjectID] = [], distribution: Distribution, reasons: [Reason]) {
        self.sink = sink
        self.used = used
        self.devices = devices
        self.distribution = distribution
        self.reasons = reasons
    }
}

/// The user's own switches (`PUT /api/notifications/settings`): push off altogether, pull
/// instead of push, or push off for a type. They shape push only; history always has it.
public struct PushSettingsPolicy: RoutingPolicy {
    /// `settings`, in explanations.
    public let name = "settings"

    /// The policy; it reads everything it needs from the recipient's settings.
    public init() {}

    /// Excludes push sinks when the user turned push off, pulls instead, or turned off this type.
    public func verdict(on sink: NotificationRouter.Sink, for notification: HeraldNotification, recipient: RecipientContext, at now: Date) -> RoutingVerdict? {
        guard sink.capabilities.contains(.push) else { return nil }
        let settings = recipient.settings
        if !settings.enabled { return .excluded(because: "the user turned push off") }
        if settings.delivery == .pull { return .excluded(because: "the user pulls from history instead of push") }
        if settings.types[notification.type] == false { return .excluded(because: "the user turned push off for '\(notification.type)'") }
        return nil
    }
}

extension RoutingVerdict {
    /// The one rule that combines policies' verdicts on a sink: used when some verdict requires
    /// it, else when none excludes it. Stops at the first `required`, so a lazy sequence asks no
    /// policy after it.
    static func admit(_ verdicts: some Sequence<RoutingVerdict>) -> Bool {
        var excluded = false
        for verdict in verdicts {
            switch verdict {
            case .required: return true
            case .excluded: excluded = true
            case .included: break
            }
        }
        return !excluded
    }
}

extension [any RoutingPolicy] {
    /// Whether the policies let `sink` be used for this recipient (``RoutingVerdict/admit(_:)``).
    /// The router's hot path: no reasons are kept.
    func admit(_ sink: NotificationRouter.Sink, _ notification: HeraldNotification, _ recipient: RecipientContext, at now: Date) -> Bool {
        RoutingVerdict.admit(lazy.compactMap { $0.verdict(on: sink, for: notification, recipient: recipient, at: now) })
    }
}
