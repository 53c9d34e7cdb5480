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
/// (``required(because:step:source:)``) beats an opt-out.
public struct RoutingVerdict: Sendable, Equatable {
    /// What the verdict does to the sink.
    public enum Effect: String, Sendable, Equatable {
        /// Use the sink, unless another policy excludes it.
        case include
        /// Do not use the sink, unless another policy requires it.
        case exclude
        /// Use the sink whatever other policies say.
        case require
    }

    /// What it does.
    public var effect: Effect
    /// Why, in words an operator or a user reads.
    public var reason: String
    /// The rule it comes from, as explanations name it (`type_channel`, `critical`); nil
    /// names it by the policy.
    public var step: String?
    /// Whose choice it carries out (`user`, `operator`, `sink`); nil names the policy.
    public var source: String?

    /// A verdict; ``included(because:step:source:)`` and its siblings read better.
    public init(_ effect: Effect, because reason: String, step: String? = nil, source: String? = nil) {
        self.effect = effect
        self.reason = reason
        self.step = step
        self.source = source
    }

    /// Use the sink, unless another policy excludes it.
    public static func included(because reason: String, step: String? = nil, source: String? = nil) -> RoutingVerdict {
        RoutingVerdict(.include, because: reason, step: step, source: source)
    }

    /// Do not use the sink, unless another policy requires it.
    public static func excluded(because reason: String, step: String? = nil, source: String? = nil) -> RoutingVerdict {
        RoutingVerdict(.exclude, because: reason, step: step, source: source)
    }

    /// Use the sink whatever other policies say.
    public static func required(because reason: String, step: String? = nil, source: String? = nil) -> RoutingVerdict {
        RoutingVerdict(.require, because: reason, step: step, source: source)
    }

    /// Whether, on its own, the verdict lets the sink be used.
    public var delivers: Bool { effect != .exclude }
}

/// Why a sink is used or not for one recipient: every reason that counted, in the order they
/// were given (the operator's rules first, then each policy).
public struct RoutingDecision: Sendable, Equatable {
    /// One verdict, and who gave it.
    public struct Reason: Sendable, Equatable {
        /// Who gave it: `rules` (routing rules and the sink's own), `devices`, or a policy's name.
        public var giver: String
        /// What it said, with its reason.
        public var verdict: RoutingVerdict

        /// A reason given by `giver`.
        public init(giver: String, verdict: RoutingVerdict) {
            self.giver = giver
            self.verdict = verdict
        }

        /// The rule it comes from (`routing_rule`, `type_channel`): the verdict's step, else who gave it.
        public var step: String { verdict.step ?? giver }
        /// Whose choice it was (`user`, `operator`, `sink`): the verdict's source, else who gave it.
        public var source: String { verdict.source ?? giver }
        /// Whether it speaks for using the sink.
        public var value: Bool { verdict.delivers }
    }

    /// The sink decided on.
    public var sink: String
    /// Whether the recipient gets a delivery through it.
    public var used: Bool
    /// The channel the sink delivers on, as the deciding router knew it.
    public var channel: SinkChannel
    /// For a push sink used: the devices it sends to.
    public var devices: [ObjectID]
    /// The distribution the recipient gets (an alert is information in quiet hours).
    public var distribution: Distribution
    /// Every reason that counted, in the order given.
    public var reasons: [Reason]

    /// A decision, as ``NotificationRouter/explain(_:for:at:)`` makes it.
    public init(sink: String, channel: SinkChannel, used: Bool, devices: [ObjectID] = [], distribution: Distribution, reasons: [Reason]) {
        self.sink = sink
        self.channel = channel
        self.used = used
        self.devices = devices
        self.distribution = distribution
        self.reasons = reasons
    }
}

extension RoutingVerdict {
    /// The one rule that combines policies' verdicts on a sink: used when some verdict requires
    /// it, else when none excludes it. Stops at the first `required`, so a lazy sequence asks no
    /// policy after it.
    static func admit(_ verdicts: some Sequence<RoutingVerdict>) -> Bool {
        var excluded = false
        for verdict in verdicts {
            switch verdict.effect {
            case .require: return true
            case .exclude: excluded = true
            case .include: break
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
