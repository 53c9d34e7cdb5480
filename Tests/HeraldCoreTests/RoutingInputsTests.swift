import Foundation
import HeraldCore
import Testing

/// What a notification was routed with, stored once per configuration (docs/routing.md,
/// "Explaining a decision"): read back, it decides every case as the router it came from.
@Suite struct RoutingInputsTests {
    let ids = ObjectIDGenerator()
    let now = Date(timeIntervalSince1970: 1_700_000_000)

    struct NoChatAtNight: RoutingPolicy {
        let name = "night"
        func verdict(on sink: NotificationRouter.Sink, for notification: HeraldNotification, recipient: RecipientContext, at now: Date) -> RoutingVerdict? {
            sink.channel.name == "chat" && notification.type == "hot" ? .excluded(because: "no hot chats") : nil
        }
    }

    func router(
        rules: [String] = ["type=comment,reply distribution=alert => +chat", "target=topic topic=news. => -apns +webhook:audit"]
    ) throws
        -> NotificationRouter
    {
        try NotificationRouter(
            sinks: [
                .init(name: "history", capabilities: .perUser),
                .init(name: "fcm", capabilities: [.push, .topics, .topicMembership], providers: .only(["fcm", "fcm-web"])),
                .init(name: "apns", capabilities: [.push, .endpointPerDevice], providers: .only(["apns"])),
                .init(name: "console", capabilities: .push, providers: .all),
                .init(name: "chat", capabilities: .perUser, channel: SinkChannel("chat")),
                .init(name: "webhook:audit", capabilities: [.perUser, .events], channel: .operatorOnly),
                .init(name: "feed", capabilities: .broadcast),
            ],
            rules: try rules.map(RoutingRule.parse),
            policies: [PreferencePolicy(ChannelPreferences(defaults: ["upvote": ["push": false]], critical: ["alert", "violation"])), NoChatAtNight()],
            defaultTimeZone: TimeZone(identifier: "Asia/Tokyo") ?? .current)
    }

    @Test func theStoredTextReadsBackAsTheSameInputs() throws {
        let inputs = RoutingInputs(router: try router())
        let read = try RoutingInputs(json: inputs.json)
        #expect(read == inputs && read.id == inputs.id)
        #expect(inputs.id.count == 16 && inputs.id.allSatisfy(\.isHexDigit))
        #expect(inputs.policies == ["night"])
        #expect(inputs.critical == ["alert", "violation"])
        #expect(inputs.defaultTimeZone == "Asia/Tokyo")
        #expect(
            try RoutingInputs(json: #"{"sinks":[],"rules":[],"defaults":{},"critical":[],"policies":[]}"#).defaultTimeZone == nil, "inputs recorded before it")
        #expect(inputs.sinks.first { $0.name == "console" }?.providers == nil, "every provider")
        #expect(throws: (any Error).self) { try RoutingInputs(json: "{\"sinks\": 3}") }
    }

    @Test func oneConfigurationIsOneIdAndAnotherIsAnother() throws {
        #expect(RoutingInputs(router: try router()).id == RoutingInputs(router: try router()).id)
        #expect(RoutingInputs(router: try router()).id != RoutingInputs(router: try router(rules: [])).id)
    }

    /// Every type, distribution, target and setting the router distinguishes: the router read
    /// back from the inputs decides each exactly as the original.
    @Test func theRouterReadBackDecidesAsTheOriginal() throws {
        let original = try router()
        let restored = try RoutingInputs(router: original).router(policies: [PreferencePolicy(), NoChatAtNight()])
        #expect(restored.sinks == original.sinks)
        #expect(restored.defaultTimeZone.identifier == "Asia/Tokyo")
        #expect(restored.rules == original.rules)
        let devices = ["fcm", "fcm-web", "apns", "other"].map {
            Device(id: ids.next(), userID: "u", address: DeviceAddress(provider: $0, token: "t-\($0)"), createdAt: now, updatedAt: now)
        }
        var muted = UserSettings()
        muted.enabled = false
        var pull = UserSettings()
        pull.delivery = .pull
        var noChat = UserSettings()
        noChat.channels = ["chat": false]
        // 22:13 UTC, 07:13 in Tokyo: quiet in one zone, not in the other.
        let quietNoZone = UserSettings(quietHours: QuietHours(start: "22:00", end: "07:00"))
        let targets: [NotificationTarget] = [.users(["u"]), .topic("news.eu"), .topic("sport.eu"), .audience(Audience(all: true))]
        for type in ["comment", "reply", "upvote", "alert", "hot"] {
            for distribution in Distribution.allCases {
                for target in targets {
                    for settings in [UserSettings(), muted, pull, noChat, quietNoZone] {
                        for level in [nil, SubscriptionLevel.forced] {
                            let notification = HeraldNotification(
                                id: ids.next(), type: type, title: "t", body: "b", url: nil, timestamp: now, distribution: distribution, target: target)
                            let recipient = RecipientContext(userID: "u", settings: settings, devices: devices, subjectLevel: level)
                            #expect(restored.explain(notification, for: recipient, at: now) == original.explain(notification, for: recipient, at: now))
                            #expect(restored.plan(notification, for: recipient, at: now) == original.plan(notification, for: recipient, at: now))
                        }
                    }
                }
            }
        }
    }

    /// A policy the inputs do not name is not this process's to add to an old decision; one
    /// they name but this process lacks is gone.
    @Test func onlyThePoliciesNamedAreKept() throws {
        let inputs = RoutingInputs(router: try router())
        struct Other: RoutingPolicy {
            let name = "other"
            func verdict(on sink: NotificationRouter.Sink, for notification: HeraldNotification, recipient: RecipientContext, at now: Date) -> RoutingVerdict? {
                nil
            }
        }
        #expect(try inputs.router(policies: [PreferencePolicy(), Other(), NoChatAtNight()]).policies.map(\.name) == ["preferences", "night"])
        #expect(try inputs.router(policies: []).policies.map(\.name) == ["preferences"])
    }
}
