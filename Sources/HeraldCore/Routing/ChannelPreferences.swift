/// The operator's side of users' channel preferences (docs/routing.md, "Channels and
/// preferences"): what a user who never chose gets (`preferences.defaults`), and the types
/// user-facing channels deliver whatever users chose (`preferences.critical`).
public struct ChannelPreferences: Sendable, Equatable {
    /// Per type, per channel: the value for a user who set neither the pair nor the channel.
    public var defaults: [String: [String: Bool]]
    /// Types every user-facing channel delivers whatever the user chose (quiet hours still
    /// turn an alert silent).
    public var critical: Set<String>

    /// No defaults and no critical types: every chosen sink reaches users who did not opt out.
    public init(defaults: [String: [String: Bool]] = [:], critical: Set<String> = []) {
        self.defaults = defaults
        self.critical = critical
    }

    /// Which rule decided, in the order they are tried.
    public enum Step: String, Sendable, CaseIterable {
        /// The sink is an operator's own: preferences do not apply.
        case notUserFacing = "not_user_facing"
        /// History and the live stream are never suppressed.
        case inApp = "in_app"
        /// A critical type, or a Forced subject's message on `push`.
        case critical
        /// The user's master switch, `enabled: false`.
        case masterSwitch = "master_switch"
        /// `delivery: pull`: no push.
        case deliveryPull = "delivery_pull"
        /// The user's choice for this type on this channel (`types` for push, `preferences`).
        case typeChannel = "type_channel"
        /// The user's switch for the channel (`channels`).
        case channelSwitch = "channel_switch"
        /// The operator's default for this type on this channel.
        case operatorDefault = "operator_default"
        /// Nothing set: the sink was chosen for the notification, so it delivers.
        case sinkDefault = "sink_default"
    }

    /// Whose choice decided.
    public enum Source: String, Sendable {
        /// The user's settings.
        case user
        /// The operator's configuration.
        case `operator`
        /// The sink's own default.
        case sink
    }

    /// What the preferences say of one type on one channel for one user.
    public struct Outcome: Sendable, Equatable {
        /// Whether the channel delivers the type to the user.
        public var delivers: Bool
        /// The rule that decided.
        public var step: Step
        /// Whose choice it was.
        public var source: Source

        /// An outcome.
        public init(_ delivers: Bool, _ step: Step, _ source: Source) {
            self.delivers = delivers
            self.step = step
            self.source = source
        }
    }

    /// The one resolution: not user-facing or `in_app` → delivers; critical (or `forced` on
    /// `push`) → delivers; the master switch off → not; `delivery: pull` → no push; then the
    /// user's type×channel choice, the user's channel switch, the operator's default, and the
    /// sink's default (delivers), the first that is set.
    public func resolve(type: String, channel: SinkChannel, settings: UserSettings, forced: Bool = false) -> Outcome {
        guard channel.userFacing else { return Outcome(true, .notUserFacing, .operator) }
        guard channel != .inApp else { return Outcome(true, .inApp, .operator) }
        let isPush = channel.name == SinkChannel.push.name
        if (!critical.isEmpty && critical.contains(type)) || (forced && isPush) { return Outcome(true, .critical, .operator) }
        if !settings.enabled { return Outcome(false, .masterSwitch, .user) }
        if isPush && settings.delivery == .pull { return Outcome(false, .deliveryPull, .user) }
        if let chosen = settings.choice(type: type, channel: channel.name) { return Outcome(chosen, .typeChannel, .user) }
        if let chosen = settings.channels[channel.name] { return Outcome(chosen, .channelSwitch, .user) }
        if let chosen = defaults[type]?[channel.name] { return Outcome(chosen, .operatorDefault, .operator) }
        return Outcome(true, .sinkDefault, .sink)
    }

    /// What a user may not turn off: every critical type on every choosable channel, sorted.
    public func locked(channels: [String]) -> [LockedPreference] {
        critical.sorted().flatMap { type in channels.sorted().map { LockedPreference(type: type, channel: $0) } }
    }
}

/// A type on a channel the user may not turn off (`locked` in the settings document).
public struct LockedPreference: Sendable, Hashable, Codable {
    /// The notification type.
    public var type: String
    /// The channel.
    public var channel: String

    /// A locked pair.
    public init(type: String, channel: String) {
        self.type = type
        self.channel = channel
    }
}
