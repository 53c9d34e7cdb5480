import Foundation
import HeraldCore
import Testing

/// Routing policies (docs/architecture.md, "Extension points"): a module adds reasons to use or
/// skip a sink per recipient without editing the router, and every decision can be explained.
@Suite struct RoutingPolicyTests {
    static let sinks = [
        NotificationRouter.Sink(name: "history", capabilities: .perUser),
        NotificationRouter.Sink(name: "fcm", capabilities: [.push, .topics], providers: .only(["fcm"])),
        NotificationRouter.Sink(name: "apns", capabilities: .push, providers: .only(["apns"])),
        NotificationRouter.Sink(name: "webhook:moderation", capabilities: .perUser),
    ]
    let ids = ObjectIDGenerator()
    let now = Date(timeIntervalSince1970: 1_700_000_000)

    func notification(type: String = "comment") -> HeraldNotification {
        HeraldNotification(id: ids.next(), type: type, title: "t", body: "b", url: nil, timestamp: now, distribution: .alert, target: .users(["u"]))
    }

    func recipient(_ settings: UserSettings = UserSettings(), providers: [String] = ["fcm", "apns"]) -> RecipientContext {
        RecipientContext(
            userID: "u", settings: settings,
            devices: providers.map {
                Device(id: ids.next(), userID: "u", address: DeviceAddress(provider: $0, token: "t-\($0)"), createdAt: now, updatedAt: now)
            }
        )
    }

    /// A module's policy: no APNs for `comment`, and `violation` always reaches every channel.
    struct ChannelChoices: RoutingPolicy {
        let name = "module"
        func verdict(on sink: NotificationRouter.Sink, for notification: HeraldNotification, recipient: RecipientContext, at now: Date) -> RoutingVerdict? {
            if notification.type == "violation" { return .required(because: "violations are critical") }
            if sink.name == "apns" && notification.type == "comment" { return .excluded(because: "comments are off on iOS") }
            if sink.name == "webhook:moderation" { return .excluded(because: "no moderation copies") }
            return nil
        }
    }

    @Test func aModulesPolicyExcludesOneSinkForOneType() throws {
        let router = try NotificationRouter(sinks: Self.sinks, policies: [PreferencePolicy(), ChannelChoices()])
        let comment = router.plan(notification(type: "comment"), for: recipient(), at: now)
        #expect(Set(comment.map(\.sink)) == ["history", "fcm"])
        let upvote = router.plan(notification(type: "upvote"), for: recipient(), at: now)
        #expect(Set(upvote.map(\.sink)) == ["history", "fcm", "apns"])
    }

    @Test func aRequiredSinkBeatsTheUsersOptOutButHistoryIsNeverAPolicysToRemove() throws {
        let off = UserSettings(enabled: false)
        let router = try NotificationRouter(sinks: Self.sinks, policies: [PreferencePolicy(), ChannelChoices()])
        #expect(router.plan(notification(type: "comment"), for: recipient(off), at: now).map(\.sink) == ["history"])
        let critical = router.plan(notification(type: "violation"), for: recipient(off), at: now)
        #expect(Set(critical.map(\.sink)) == ["history", "fcm", "apns"], "a critical type reaches a user who turned push off")

        struct NoHistory: RoutingPolicy {
            let name = "greedy"
            func verdict(on sink: NotificationRouter.Sink, for notification: HeraldNotification, recipient: RecipientContext, at now: Date) -> RoutingVerdict? {
                .excluded(because: "everything off")
            }
        }
        let greedy = try NotificationRouter(sinks: Self.sinks, policies: [NoHistory()])
        #expect(greedy.plan(notification(), for: recipient(), at: now).map(\.sink) == ["history"])
    }

    @Test func aPolicyMayExcludeARuleAddedPerUserSink() throws {
        let rule = try RoutingRule.parse("type=comment => +webhook:moderation")
        let plain = try NotificationRouter(sinks: Self.sinks, rules: [rule])
        #expect(plain.plan(notification(), for: recipient(), at: now).contains { $0.sink == "webhook:moderation" })
        let router = try NotificationRouter(sinks: Self.sinks, rules: [rule], policies: [ChannelChoices()])
        #expect(!router.plan(notification(), for: recipient(), at: now).contains { $0.sink == "webhook:moderation" })
    }

    @Test func everyDecisionIsExplainedAndAgreesWithThePlan() throws {
        let rule = try RoutingRule.parse("type=comment => +webhook:moderation")
        let router = try NotificationRouter(sinks: Self.sinks, rules: [rule], policies: [PreferencePolicy(), ChannelChoices()])
        let who = recipient(UserSettings(types: ["upvote": false]), providers: ["fcm"])
        for type in ["comment", "upvote", "violation"] {
            let n = notification(type: type)
            let decisions = router.explain(n, for: who, at: now)
            #expect(decisions.map(\.sink) == Self.sinks.map(\.name))
            let planned = router.plan(n, for: who, at: now)
            #expect(Set(decisions.filter(\.used).map(\.sink)) == Set(planned.map(\.sink)), "\(type): \(decisions)")
            for decision in decisions where decision.used {
                #expect(Set(decision.devices) == Set(planned.filter { $0.sink == decision.sink }.compactMap(\.deviceID)))
            }
        }
        let comment = router.explain(notification(type: "comment"), for: who, at: now)
        let byName = Dictionary(uniqueKeysWithValues: comment.map { ($0.sink, $0) })
        #expect(byName["history"]?.reasons.first?.step == "in_app")
        #expect(byName["history"]?.reasons.first?.verdict.effect == .require)
        #expect(byName["apns"]?.reasons.last == .init(giver: "module", verdict: .excluded(because: "comments are off on iOS")))
        let violation = Dictionary(uniqueKeysWithValues: router.explain(notification(type: "violation"), for: who, at: now).map { ($0.sink, $0) })
        #expect(violation["apns"]?.used == false && violation["apns"]?.reasons.last?.step == "no_device_for_provider", "required, but no iOS device: said so")
        #expect(violation["fcm"]?.used == true && violation["fcm"]?.devices.count == 1)
        let webhook = try #require(byName["webhook:moderation"])
        #expect(!webhook.used)
        #expect(
            webhook.reasons.contains {
                $0.step == "routing_rule" && $0.source == "operator" && $0.verdict.reason.contains("type=comment => +webhook:moderation")
            })
        #expect(webhook.reasons.last == .init(giver: "module", verdict: .excluded(because: "no moderation copies")))
        let upvote = Dictionary(uniqueKeysWithValues: router.explain(notification(type: "upvote"), for: who, at: now).map { ($0.sink, $0) })
        #expect(upvote["fcm"]?.used == false)
        let last = try #require(upvote["fcm"]?.reasons.last)
        #expect((last.giver, last.step, last.source, last.value) == ("preferences", "type_channel", "user", false))
    }

    @Test func aRuleReadsBackAsItsConfigurationLine() throws {
        for line in ["type=hot,top distribution=information target=user_ids => -fcm +console", "topic=sports- => +webhook:sports"] {
            let rule = try RoutingRule.parse(line)
            #expect(try RoutingRule.parse(rule.description) == rule)
        }
    }

    @Test func messageHubDeliveriesFollowThePolicies() throws {
        let router = try NotificationRouter(sinks: Self.sinks, policies: [PreferencePolicy(), ChannelChoices()])
        #expect(router.messageHubDeliveries(notification(type: "comment"), for: recipient(), at: now).isEmpty, "APNs is off for comments")
        #expect(router.messageHubDeliveries(notification(type: "upvote"), for: recipient(), at: now).map(\.sink) == ["apns"])
        #expect(router.messageHubDeliveries(notification(type: "upvote"), for: recipient(UserSettings(enabled: false)), at: now).isEmpty)
    }
}
