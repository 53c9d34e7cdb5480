public import Foundation

/// What the router needs to know about one user recipient.
public struct RecipientContext: Sendable, Equatable {
    public var userID: String
    public var settings: UserSettings
    public var devices: [Device]

    public init(userID: String, settings: UserSettings = UserSettings(), devices: [Device] = []) {
        self.userID = userID
        self.settings = settings
        self.devices = devices
    }
}

/// One delivery the router decided on, before it is stored.
public struct PlannedDelivery: Sendable, Equatable {
    public var sink: String
    public var userID: String
    public var deviceID: ObjectID?
    /// For a topic send: the provider-side topic; `userID` is then empty.
    public var topic: String?
    public var distribution: Distribution

    public init(sink: String, userID: String, deviceID: ObjectID? = nil, topic: String? = nil, distribution: Distribution) {
        self.sink = sink
        self.userID = userID
        self.deviceID = deviceID
        self.topic = topic
        self.distribution = distribution
    }
}

/// Chooses sinks per recipient (SPEC §4). Pure: no I/O, so every case is a unit test.
public struct NotificationRouter: Sendable {
    /// The sink that records every user's notifications; never removed.
    public static let historySink = "history"

    public struct Sink: Sendable, Equatable {
        public var name: String
        public var capabilities: SinkCapabilities

        public init(name: String, capabilities: SinkCapabilities) {
            self.name = name
            self.capabilities = capabilities
        }
    }

    public let sinks: [Sink]
    public let rules: [RoutingRule]

    /// - Throws: a configuration error when a rule names a sink that is not configured, or
    ///   tries to remove history.
    public init(sinks: [Sink], rules: [RoutingRule] = []) throws {
        let names = Set(sinks.map(\.name))
        for rule in rules {
            for name in rule.add + rule.remove where !names.contains(name) {
                throw HeraldError(.unprocessable, code: "invalid_config", "a routing rule names sink '\(name)', which is not configured (configured: \(sinks.map(\.name).sorted().joined(separator: ", ")))")
            }
            if rule.remove.contains(Self.historySink) {
                throw HeraldError(.unprocessable, code: "invalid_config", "a routing rule removes 'history': what a user was sent is always in their history")
            }
        }
        self.sinks = sinks
        self.rules = rules
    }

    public init(registry: SinkRegistry, rules: [RoutingRule] = []) throws {
        try self.init(sinks: registry.sinks.map { Sink(name: $0.name, capabilities: $0.capabilities) }, rules: rules)
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

    /// The deliveries of a broadcast: one for each sink that publishes broadcasts.
    public func broadcastSends(_ notification: HeraldNotification) -> [PlannedDelivery] {
        sinks.filter { $0.capabilities.contains(.broadcast) }.map { PlannedDelivery(sink: $0.name, userID: "", distribution: notification.distribution) }
    }

    /// The deliveries for one recipient.
    public func plan(_ notification: HeraldNotification, for recipient: RecipientContext, at now: Date) -> [PlannedDelivery] {
        let settings = recipient.settings
        let distribution: Distribution =
            notification.distribution == .alert && (settings.quietHours?.contains(now) ?? false) ? .information : notification.distribution
        var planned: [PlannedDelivery] = []
        for name in sinkNames(for: notification) {
            guard let sink = sinks.first(where: { $0.name == name }) else { continue }
            if sink.capabilities.contains(.push) {
                guard settings.allowsPush(type: notification.type) else { continue }
                for device in recipient.devices {
                    planned.append(PlannedDelivery(sink: name, userID: recipient.userID, deviceID: device.id, distribution: distribution))
                }
            } else {
                planned.append(PlannedDelivery(sink: name, userID: recipient.userID, distribution: distribution))
            }
        }
        return planned
    }
}
