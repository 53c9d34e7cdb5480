public import Foundation

/// Why a notification would, or would not, reach one user through each configured sink
/// (`POST /api/notifications/explain`): worked out as an accept would plan it, nothing stored
/// or sent (docs/routing.md, "Explaining a decision").
public struct RoutingExplanation: Sendable, Equatable {
    /// A device of the user, and the sink that would serve it.
    public struct DeviceRoute: Sendable, Equatable {
        /// The device as registered.
        public var device: Device
        /// The push sink that serves it; nil when none configured serves its provider and app.
        public var sink: String?

        /// A device and its sink.
        public init(device: Device, sink: String?) {
            self.device = device
            self.sink = sink
        }
    }

    /// The user explained.
    public var userID: String
    /// The notification as it would be accepted.
    public var notification: HeraldNotification
    /// What the user would get (an alert is information in their quiet hours).
    public var distribution: Distribution
    /// Why the notification's target does not include the user (then no sink reaches them);
    /// nil for a recipient.
    public var notRecipient: NotRecipient?
    /// Whether the notification's target includes the user.
    public var recipient: Bool { notRecipient == nil }
    /// Each configured sink's decision, in configuration order.
    public var decisions: [RoutingDecision]
    /// The user's devices with the sink serving each (as registered now).
    public var devices: [DeviceRoute]
    /// For an accepted notification: what it was decided with; nil for a send explained.
    public var basis: Basis?

    /// What an accepted notification's explanation was decided with.
    public struct Basis: Sendable, Equatable {
        /// The id of the routing inputs it was accepted under; nil when it names none that are
        /// stored (accepted before Herald recorded them): today's configuration decided.
        public var routingInputs: String?
        /// The user's settings in force at its accept time; nil when they had saved none by
        /// then, so the defaults decided.
        public var settings: SettingsVersion?

        /// A basis.
        public init(routingInputs: String?, settings: SettingsVersion?) {
            self.routingInputs = routingInputs
            self.settings = settings
        }
    }

    /// An explanation as ``NotificationService/explain(_:userID:now:)`` makes it.
    public init(
        userID: String, notification: HeraldNotification, distribution: Distribution, notRecipient: NotRecipient?, decisions: [RoutingDecision],
        devices: [DeviceRoute]
    ) {
        self.userID = userID
        self.notification = notification
        self.distribution = distribution
        self.notRecipient = notRecipient
        self.decisions = decisions
        self.devices = devices
    }
}

extension NotificationService {
    /// Explains how `submission` would reach `userID` (``RoutingExplanation``): validated as a
    /// send, the user's settings and devices read, the router's decision per sink with its
    /// reasons. A user the target does not include gets every sink's decision as if they were
    /// one, each sink not chosen, with the reason first.
    /// - Throws: what a send would throw for the same body (a 400 or 422 naming the field, a 404
    ///   for an unknown topic); a 422 naming `user_id` for an id that is not one.
    public func explain(_ submission: NotificationSubmission, userID: String, now: Date = Date()) async throws -> RoutingExplanation {
        try UserID.validate(userID, field: "user_id")
        let notification = try validator.validate(submission, id: ids.next(at: now), now: now)
        // Explained as sent now; a send_at or send_at_local a send would refuse is refused here too.
        _ = try validator.scheduledInstant(of: submission, now: now)
        _ = try validator.localSendTime(of: submission, now: now)
        return try await explain(notification, userID: userID, accepted: false, topicDistribution: submission.distribution == nil, at: now)
    }

    /// One recipient's explanation of accepted notification `id`, decided again as it was
    /// decided: by the routing inputs it was accepted under (``HeraldNotification/routingInputs``)
    /// and the user's settings in force when it went out (its accept, or a scheduled send's
    /// instant: ``UserStore/settingsVersion(userID:at:)``),
    /// with the deliveries stored for them in creation order; nil for an unknown notification.
    /// A notification accepted before inputs were recorded is decided by today's configuration,
    /// and ``RoutingExplanation/basis`` says which (docs/routing.md, "Explaining a decision").
    public func explainRecipient(of id: ObjectID, userID: String) async throws -> (explanation: RoutingExplanation, deliveries: [DeliveryRecord])? {
        guard let notification = try await store.notification(id: id) else { return nil }
        let deliveries = try await store.deliveries(of: id, userID: userID)
        var router = self.router
        var inputsUsed: String?
        if let recorded = notification.routingInputs {
            if recorded == routingInputsID {
                inputsUsed = recorded
            } else if let inputs = try await store.routingInputs(id: recorded), let then = try? inputs.router(policies: router.policies) {
                (router, inputsUsed) = (then, recorded)
            }
        }
        // Decided when it went out: at its accept, a scheduled send's instant, or the user's
        // own instant (their zone as the fan-out job read it, just after the accept).
        var decidedAt = notification.goesOutAt
        if let local = notification.sendAtLocal {
            let zone = try await store.settingsVersion(userID: userID, at: decidedAt)?.settings.timeZone(default: router.defaultTimeZone)
            decidedAt = local.instant(in: zone ?? router.defaultTimeZone, notBefore: notification.timestamp)
        }
        let version = try await store.settingsVersion(userID: userID, at: decidedAt)
        var explanation = try await explain(
            notification, userID: userID, accepted: true, topicDistribution: false, at: decidedAt, router: router,
            settings: version?.settings ?? UserSettings(), reached: !deliveries.isEmpty)
        explanation.basis = RoutingExplanation.Basis(routingInputs: inputsUsed, settings: version)
        return (explanation, deliveries)
    }

    /// - Parameters:
    ///   - accepted: whether the notification was accepted (a subject removed since is then a
    ///     reason, not a 404).
    ///   - topicDistribution: whether a topic's subject gives the distribution (a send that
    ///     named none).
    ///   - router: the router that decides (an accepted notification's own).
    ///   - settings: the user's settings to decide with; nil for those stored now.
    ///   - reached: deliveries were stored for the user, so they were a recipient whatever
    ///     their subscriptions or attributes are now.
    func explain(
        _ notification: HeraldNotification, userID: String, accepted: Bool, topicDistribution: Bool, at now: Date, router: NotificationRouter? = nil,
        settings: UserSettings? = nil, reached: Bool = false
    ) async throws
        -> RoutingExplanation
    {
        let router = router ?? self.router
        var notification = notification
        var recipient = try await store.recipients(userIDs: [userID]).first ?? RecipientContext(userID: userID)
        if let settings { recipient.settings = settings }
        var notRecipient: RoutingExplanation.NotRecipient?
        switch notification.target {
        case .users(let userIDs):
            if !userIDs.contains(where: { UserID.same($0, userID) }) { notRecipient = .notTargeted }
        case .topic(let key):
            guard let entry = try await store.subject(topicKey: key) else {
                guard accepted else { throw HeraldError.notFound("topic '\(key)'") }
                if !reached { notRecipient = .topicRemoved }
                break
            }
            if topicDistribution { notification.distribution = entry.subject.opt.distribution.distribution }
            recipient = recipient.subscribed(at: entry.subject.opt.level)
            if entry.subject.opt.level != .forced, !reached {
                if try await !store.isSubscribed(userID: userID, topicKey: key) { notRecipient = .topicNotSubscribed }
            }
        case .audience(let audience):
            if !reached {
                let attributes = try await store.attributes(userID: userID) ?? UserAttributes()
                if !audience.includes(userID: userID, attributes: attributes) { notRecipient = .notInAudience }
            }
        case .broadcast:
            notRecipient = .broadcast
        }
        var decisions = router.explain(notification, for: recipient, at: now)
        if let notRecipient {
            let reason = RoutingDecision.Reason(
                giver: "target", verdict: .excluded(because: notRecipient.words, step: notRecipient.rawValue, source: "sender"))
            decisions = decisions.map { decision in
                var decision = decision
                decision.used = false
                decision.devices = []
                decision.reasons.insert(reason, at: 0)
                return decision
            }
        }
        let devices = recipient.devices.map { device in
            RoutingExplanation.DeviceRoute(device: device, sink: router.sinks.first { router.serves($0, device) }?.name)
        }
        return RoutingExplanation(
            userID: userID, notification: notification, distribution: router.distribution(of: notification, for: recipient.settings, at: now),
            notRecipient: notRecipient, decisions: decisions, devices: devices)
    }
}

extension RoutingExplanation {
    /// Why a user is not among a notification's recipients, as explanations name it.
    public enum NotRecipient: String, Sendable, Equatable {
        /// The notification's `user_ids` do not name the user.
        case notTargeted = "not_targeted"
        /// The user is not subscribed to the (not Forced) topic.
        case topicNotSubscribed = "topic_not_subscribed"
        /// The topic's subject was removed after the accept.
        case topicRemoved = "topic_removed"
        /// The user's attributes do not match the audience.
        case notInAudience = "not_in_audience"
        /// A broadcast goes to the anonymous feed, to no user.
        case broadcast

        /// In words, for the reason's detail.
        public var words: String {
            switch self {
            case .notTargeted: "the notification's user_ids do not name the user"
            case .topicNotSubscribed: "the user is not subscribed to the topic"
            case .topicRemoved: "the topic's subject has been removed since"
            case .notInAudience: "the user's attributes do not match the audience"
            case .broadcast: "a broadcast goes to the anonymous pull feed, not to users"
            }
        }
    }
}

extension Audience {
    /// Whether the audience includes a user with `attributes`: everyone, a listed id, the user's
    /// tier, or one of their groups (OR-ed, as the stores select them).
    public func includes(userID: String, attributes: UserAttributes) -> Bool {
        if all || userIDs.contains(where: { UserID.same($0, userID) }) { return true }
        if let tier = attributes.tierID, tierIDs.contains(tier) { return true }
        return attributes.groupIDs.contains { groupIDs.contains($0) }
    }
}
