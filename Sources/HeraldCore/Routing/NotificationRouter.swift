public import Foundation

/// What the router needs to know about one user recipient.
public struct RecipientContext: Sendable, Equatable {
    /// The user.
    public var userID: String
    /// Their settings (defaults for a user Herald has never seen).
    public var settings: UserSettings
    /// Their registered devices, of every provider.
    public var devices: [Device]
    /// For a notification to a Message Hub subject: the subject's subscription level (a Forced
    /// subject's messages are critical on `push`); nil otherwise.
    public var subjectLevel: SubscriptionLevel?

    /// A recipient; a user with nothing stored gets default settings and no devices.
    public init(userID: String, settings: UserSettings = UserSettings(), devices: [Device] = [], subjectLevel: SubscriptionLevel? = nil) {
        self.userID = userID
        self.settings = settings
        self.devices = devices
        self.subjectLevel = subjectLevel
    }
}

extension RecipientContext {
    /// The recipient as a subscriber of a subject at `level`.
    public func subscribed(at level: SubscriptionLevel) -> RecipientContext {
        var recipient = self
        recipient.subjectLevel = level
        return recipient
    }
}

/// One delivery the router decided on, before it is stored.
public struct PlannedDelivery: Sendable, Equatable {
    /// The sink it goes through.
    public var sink: String
    /// The user; empty for a topic send or a broadcast.
    public var userID: String
    /// For a push: the device.
    public var deviceID: ObjectID?
    /// For a topic send: the provider-side topic; `userID` is then empty.
    public var topic: String?
    /// What the recipient gets (an alert is information in quiet hours).
    public var distribution: Distribution
    /// When it may fold into a digest (a cap, a `digest_key`, quiet hours that hold): stored
    /// `held` for the digest worker to let through or fold; nil to go out at once.
    public var fold: FoldMark?

    /// A planned delivery.
    public init(sink: String, userID: String, deviceID: ObjectID? = nil, topic: String? = nil, distribution: Distribution, fold: FoldMark? = nil) {
        self.sink = sink
        self.userID = userID
        self.deviceID = deviceID
        self.topic = topic
        self.distribution = distribution
        self.fold = fold
    }
}

/// Chooses sinks per recipient (docs/routing.md). Pure: no I/O, so every case is a unit test.
public struct NotificationRouter: Sendable {
    /// The sink that records every user's notifications; never removed.
    public static let historySink = "history"

    /// What the router knows of a sink: its name and what it can do.
    public struct Sink: Sendable, Equatable {
        /// The sink's name.
        public var name: String
        /// What it can do (``SinkCapabilities``).
        public var capabilities: SinkCapabilities
        /// For push sinks: the device providers served.
        public var providers: DeviceProviders
        /// The channel it delivers on, which users' preferences name.
        public var channel: SinkChannel

        /// A sink as the router sees it; the channel defaults as ``NotificationSink/channel`` does.
        public init(name: String, capabilities: SinkCapabilities, providers: DeviceProviders = .only([]), channel: SinkChannel? = nil) {
            self.name = name
            self.capabilities = capabilities
            self.providers = providers
            self.channel = channel ?? SinkChannel.byDefault(name: name, capabilities: capabilities)
        }
    }

    /// Every configured sink, in configuration order.
    public let sinks: [Sink]
    /// The sinks' own rules, then the operator's `routing` rules.
    public let rules: [RoutingRule]
    /// What decides, per recipient, whether a chosen sink is used (``RoutingPolicy``): the
    /// user's push settings, then each module's policies. History is never subject to them.
    public let policies: [any RoutingPolicy]
    /// The zone of users who named none (`scheduling.default_timezone`): their quiet hours
    /// without a `tz` are read in it.
    public let defaultTimeZone: TimeZone
    /// Frequency caps and the types they never touch (docs/timing.md).
    public var folding = Folding()
    /// For each provider, the first configured push sink that names it: it serves the devices
    /// of that provider that name no sink.
    private let defaultSinkByProvider: [String: String]

    /// - Throws: a configuration error when a rule names a sink that is not configured, or
    ///   tries to remove history.
    public init(
        sinks: [Sink], rules: [RoutingRule] = [], policies: [any RoutingPolicy] = [PreferencePolicy()], defaultTimeZone: TimeZone = QuietHours.utc
    ) throws {
        let names = Set(sinks.map(\.name))
        for rule in rules {
            for name in rule.add + rule.remove where !names.contains(name) {
                throw HeraldError(
                    .unprocessable, code: "invalid_config",
                    "a routing rule names sink '\(name)', which is not configured (configured: \(sinks.map(\.name).sorted().joined(separator: ", ")))")
            }
            if rule.remove.contains(Self.historySink) {
                throw HeraldError(.unprocessable, code: "invalid_config", "a routing rule removes 'history': what a user was sent is always in their history")
            }
        }
        self.sinks = sinks
        self.rules = rules
        self.policies = policies
        self.defaultTimeZone = defaultTimeZone
        var defaults: [String: String] = [:]
        for sink in sinks where sink.capabilities.contains(.push) {
            guard case .only(let providers) = sink.providers else { continue }
            for provider in providers where defaults[provider] == nil { defaults[provider] = sink.name }
        }
        defaultSinkByProvider = defaults
    }

    /// A router over a registry's sinks; each sink's own rules (``NotificationSink/routingRules``)
    /// come first, so an operator's `routing` rules can still override them.
    public init(
        registry: SinkRegistry, rules: [RoutingRule] = [], policies: [any RoutingPolicy] = [PreferencePolicy()],
        defaultTimeZone: TimeZone = QuietHours.utc
    ) throws {
        try self.init(
            sinks: registry.sinks.map { Sink(name: $0.name, capabilities: $0.capabilities, providers: $0.providers, channel: registry.channel(of: $0)) },
            rules: registry.sinks.flatMap(\.routingRules) + rules, policies: policies, defaultTimeZone: defaultTimeZone
        )
    }

    /// Whether `sink` delivers to `device`: the sink serves the device's provider, and the
    /// device names that sink, or names none and the sink is its provider's first.
    public func serves(_ sink: Sink, _ device: Device) -> Bool {
        guard sink.capabilities.contains(.push), sink.providers.contains(device.provider) else { return false }
        if case .all = sink.providers { return true }
        if let app = device.app { return app == sink.name }
        return defaultSinkByProvider[device.provider] == sink.name
    }

    /// The push sink that serves devices of `provider` registered for `app` (or for no sink),
    /// if one is configured.
    public func pushSink(provider: String, app: String?) -> Sink? {
        if let app {
            return sinks.first { $0.name == app && $0.capabilities.contains(.push) && $0.providers.contains(provider) }
        }
        return defaultSinkByProvider[provider].flatMap { name in sinks.first { $0.name == name } }
    }

    /// The names of the sinks a notification goes through, before per-user settings apply.
    public func sinkNames(for notification: HeraldNotification) -> [String] {
        var chosen = sinks.filter { $0.name == Self.historySink || $0.capabilities.contains(.push) }.map(\.name)
        for rule in rules where rule.matches(notification) {
            chosen.removeAll { rule.remove.contains($0) }
            for name in rule.add where !chosen.contains(name) { chosen.append(name) }
        }
        return chosen
    }

    /// Topic sends for a Message Hub message: one delivery per component for every sink that
    /// can send to topics. An alert has two components — the visible notification (`alert`) and
    /// the silent data message (`information`); information has the data message only.
    public func topicSends(_ notification: HeraldNotification, topic: String) -> [PlannedDelivery] {
        let components: [Distribution] = notification.distribution == .alert ? [.alert, .information] : [.information]
        return sinks.filter { $0.capabilities.contains(.topics) }.flatMap { sink in
            components.map { PlannedDelivery(sink: sink.name, userID: "", topic: topic, distribution: $0) }
        }
    }

    /// Whether a Message Hub message needs per-device deliveries: some push sink cannot send to
    /// provider-side topics.
    public var hasPushSinksWithoutTopics: Bool {
        sinks.contains { $0.capabilities.contains(.push) && !$0.capabilities.contains(.topics) }
    }

    /// A Message Hub message's deliveries to one subscriber's devices, for push sinks without
    /// provider-side topics (APNs, Web Push): one delivery per device, when the policies (the
    /// user's settings first) allow the sink; an alert arrives as information during quiet hours. (Sinks with topics reach
    /// the same users through ``topicSends(_:topic:)``.)
    public func messageHubDeliveries(_ notification: HeraldNotification, for recipient: RecipientContext, at now: Date) -> [PlannedDelivery] {
        let distribution = distribution(of: notification, for: recipient.settings, at: now)
        var planned: [PlannedDelivery] = []
        for sink in sinks where sink.capabilities.contains(.push) && !sink.capabilities.contains(.topics) {
            guard policies.admit(sink, notification, recipient, at: now) else { continue }
            for device in recipient.devices where serves(sink, device) {
                planned.append(PlannedDelivery(sink: sink.name, userID: recipient.userID, deviceID: device.id, distribution: distribution))
            }
        }
        return planned
    }

    /// The deliveries of a broadcast: one for each sink that publishes broadcasts.
    public func broadcastSends(_ notification: HeraldNotification) -> [PlannedDelivery] {
        sinks.filter { $0.capabilities.contains(.broadcast) }.map { PlannedDelivery(sink: $0.name, userID: "", distribution: notification.distribution) }
    }

    /// The distribution a user gets: an alert arrives as information during quiet hours (a push
    /// quiet hours hold waits for their end as an alert instead: ``plan(_:for:at:)``).
    func distribution(of notification: HeraldNotification, for settings: UserSettings, at now: Date) -> Distribution {
        notification.distribution == .alert && settings.inQuietHours(at: now, defaultZone: defaultTimeZone) ? .information : notification.distribution
    }

    /// Whether a delivery through `sink` may fold into a digest (docs/timing.md): the sender's
    /// `digest_key` on any push; else, for a type not critical (nor a Forced subject's message),
    /// an alert in quiet hours that hold, or the first `caps` rule of its type and channel.
    func foldMark(_ notification: HeraldNotification, for recipient: RecipientContext, through sink: Sink, at now: Date) -> FoldMark? {
        guard sink.name != Self.historySink, sink.channel.userFacing else { return nil }
        if let key = notification.digestKey, let seconds = notification.digestWindow, sink.capabilities.contains(.push) {
            return FoldMark(key: FoldMark.digestKey(key), max: 0, seconds: seconds)
        }
        guard !folding.critical.contains(notification.type), recipient.subjectLevel != .forced else { return nil }
        let zone = recipient.settings.timeZone(default: defaultTimeZone)
        if notification.distribution == .alert, sink.capabilities.contains(.push), let quiet = recipient.settings.quietHours, quiet.holds,
            quiet.contains(now, fallback: zone)
        {
            return FoldMark(key: FoldMark.quietHoursKey, max: 0, until: quiet.end(after: now, fallback: zone))
        }
        return folding.caps.first { $0.channel == sink.channel.name && $0.types.contains(notification.type) }?.mark
    }

    /// The deliveries for one recipient.
    public func plan(_ notification: HeraldNotification, for recipient: RecipientContext, at now: Date) -> [PlannedDelivery] {
        let distribution = distribution(of: notification, for: recipient.settings, at: now)
        // Nothing to fold (no caps, no digest_key, no quiet hours that hold): no work per sink.
        let mayFold = !folding.caps.isEmpty || notification.digestKey != nil || recipient.settings.quietHours?.holds == true
        var planned: [PlannedDelivery] = []
        for name in sinkNames(for: notification) {
            guard let sink = sinks.first(where: { $0.name == name }) else { continue }
            if name != Self.historySink, !policies.admit(sink, notification, recipient, at: now) { continue }
            let fold = mayFold ? foldMark(notification, for: recipient, through: sink, at: now) : nil
            // Held for quiet hours' end, an alert goes out loud then, not silent now.
            let sent = fold?.key == FoldMark.quietHoursKey ? notification.distribution : distribution
            if sink.capabilities.contains(.push) {
                for device in recipient.devices where serves(sink, device) {
                    planned.append(PlannedDelivery(sink: name, userID: recipient.userID, deviceID: device.id, distribution: sent, fold: fold))
                }
            } else {
                planned.append(PlannedDelivery(sink: name, userID: recipient.userID, distribution: sent, fold: fold))
            }
        }
        return planned
    }

    /// Why each configured sink is or is not used for this recipient: the operator's rules (and
    /// the sinks' own), the devices a push sink would serve, and every policy's verdict, in the
    /// configured sinks' order. Agrees with ``plan(_:for:at:)``, which keeps no reasons.
    public func explain(_ notification: HeraldNotification, for recipient: RecipientContext, at now: Date) -> [RoutingDecision] {
        let distribution = distribution(of: notification, for: recipient.settings, at: now)
        let chosen = sinkNames(for: notification)
        return sinks.map { sink in
            var reasons: [RoutingDecision.Reason] = []
            func say(_ giver: String, _ verdict: RoutingVerdict) { reasons.append(.init(giver: giver, verdict: verdict)) }
            if sink.name == Self.historySink {
                say("rules", .required(because: "a user's history holds everything they were sent", step: "in_app", source: "operator"))
                return RoutingDecision(sink: sink.name, channel: sink.channel, used: true, distribution: distribution, reasons: reasons)
            }
            let byDefault = sink.capabilities.contains(.push)
            say(
                "rules",
                byDefault
                    ? .included(because: "push sinks are used unless a rule removes them", step: "sink_type", source: "sink")
                    : .excluded(because: "used only when a rule adds it", step: "sink_type", source: "sink"))
            for rule in rules where rule.matches(notification) {
                if rule.remove.contains(sink.name) { say("rules", .excluded(because: "\(rule)", step: "routing_rule", source: "operator")) }
                if rule.add.contains(sink.name) { say("rules", .included(because: "\(rule)", step: "routing_rule", source: "operator")) }
            }
            guard chosen.contains(sink.name) else {
                return RoutingDecision(sink: sink.name, channel: sink.channel, used: false, distribution: distribution, reasons: reasons)
            }
            let verdicts = policies.compactMap { policy in
                policy.verdict(on: sink, for: notification, recipient: recipient, at: now).map { (policy.name, $0) }
            }
            for (name, verdict) in verdicts { say(name, verdict) }
            var used = RoutingVerdict.admit(verdicts.lazy.map(\.1))
            var devices: [ObjectID] = []
            if used, sink.capabilities.contains(.push) {
                devices = recipient.devices.filter { serves(sink, $0) }.map(\.id)
                if devices.isEmpty {
                    used = false
                    say("devices", .excluded(because: "the user has no device this sink serves", step: "no_device_for_provider", source: "user"))
                }
            }
            var sent = distribution
            // What plan() marks to fold, said as it is decided (docs/timing.md).
            if used, let fold = foldMark(notification, for: recipient, through: sink, at: now) {
                if fold.key == FoldMark.quietHoursKey {
                    sent = notification.distribution
                    say("settings", .included(because: "quiet hours hold: the alert waits for their end", step: "quiet_hours_hold", source: "user"))
                } else if let cap = folding.rule(forKey: fold.key) {
                    let because = "cap '\(cap.name)': \(cap.max) per \(cap.seconds) s, then folded into one digest at the window's end"
                    say("caps", .included(because: because, step: "frequency_cap", source: "operator"))
                } else {
                    let because = "digest_key: folded with the same key's for \(fold.seconds ?? 0) s, one push at the window's end"
                    say("sender", .included(because: because, step: "digest_key", source: "sender"))
                }
            }
            if used, sent != notification.distribution {
                say("settings", .included(because: "quiet hours: the alert arrives silent, as information", step: "quiet_hours", source: "user"))
            }
            return RoutingDecision(sink: sink.name, channel: sink.channel, used: used, devices: devices, distribution: sent, reasons: reasons)
        }
    }
}
