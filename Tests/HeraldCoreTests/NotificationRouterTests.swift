import Foundation
import HeraldCore
import Testing

@Suite struct NotificationRouterTests {
    static let sinks = [
        NotificationRouter.Sink(name: "history", capabilities: .perUser),
        NotificationRouter.Sink(name: "fcm", capabilities: [.push, .topics], providers: .only(["fcm"])),
        NotificationRouter.Sink(name: "webhook:moderation", capabilities: .perUser),
    ]
    let ids = ObjectIDGenerator()
    // 2023-11-14T22:13:20Z: 17:13 in Toronto
    let now = Date(timeIntervalSince1970: 1_700_000_000)

    func notification(type: String = "upvote", distribution: Distribution = .alert) -> HeraldNotification {
        HeraldNotification(id: ids.next(), type: type, title: "t", body: "b", url: nil, timestamp: now, distribution: distribution, target: .users(["u"]))
    }

    func recipient(_ settings: UserSettings, devices: Int = 2) -> RecipientContext {
        RecipientContext(
            userID: "u", settings: settings,
            devices: (0..<devices).map {
                Device(id: ids.next(), userID: "u", address: DeviceAddress(provider: "fcm", token: "t\($0)"), createdAt: now, updatedAt: now)
            }
        )
    }

    struct Case: Sendable, CustomStringConvertible {
        var enabled: Bool
        var optedOut: Bool
        var delivery: DeliveryPreference
        var distribution: Distribution
        var description: String { "enabled=\(enabled) optedOut=\(optedOut) delivery=\(delivery) distribution=\(distribution)" }
    }

    static let matrix: [Case] = [true, false].flatMap { enabled in
        [true, false].flatMap { optedOut in
            [DeliveryPreference.push, .pull].flatMap { delivery in
                Distribution.allCases.map { Case(enabled: enabled, optedOut: optedOut, delivery: delivery, distribution: $0) }
            }
        }
    }

    @Test(arguments: matrix)
    func settingsByDistributionMatrix(_ c: Case) throws {
        let router = try NotificationRouter(sinks: Self.sinks)
        let settings = UserSettings(enabled: c.enabled, types: c.optedOut ? ["upvote": false] : ["comment": false], delivery: c.delivery)
        let planned = router.plan(notification(distribution: c.distribution), for: recipient(settings), at: now)
        let history = planned.filter { $0.sink == "history" }
        let push = planned.filter { $0.sink == "fcm" }
        #expect(history.count == 1, "history is always written")
        let pushAllowed = c.enabled && !c.optedOut && c.delivery == .push
        #expect(push.count == (pushAllowed ? 2 : 0), "one push per device only when allowed")
        #expect(planned.allSatisfy { $0.distribution == c.distribution })
        #expect(Set(push.compactMap(\.deviceID)).count == push.count)
        #expect(!planned.contains { $0.sink == "webhook:moderation" }, "extra sinks only through rules")
    }

    @Test func noDevicesMeansHistoryOnly() throws {
        let router = try NotificationRouter(sinks: Self.sinks)
        let planned = router.plan(notification(), for: recipient(UserSettings(), devices: 0), at: now)
        #expect(planned.map(\.sink) == ["history"])
    }

    @Test func quietHoursTurnAlertsIntoInformation() throws {
        let router = try NotificationRouter(sinks: Self.sinks)
        let quiet = UserSettings(quietHours: QuietHours(start: "17:00", end: "18:00", tz: "America/Toronto"))
        let loud = UserSettings(quietHours: QuietHours(start: "18:00", end: "17:00", tz: "America/Toronto"))
        #expect(router.plan(notification(), for: recipient(quiet), at: now).allSatisfy { $0.distribution == .information })
        #expect(router.plan(notification(), for: recipient(loud), at: now).allSatisfy { $0.distribution == .alert })
        #expect(router.plan(notification(distribution: .information), for: recipient(quiet), at: now).allSatisfy { $0.distribution == .information })
        // Quiet hours change how, never whether: the push still goes out, silently.
        #expect(router.plan(notification(), for: recipient(quiet), at: now).filter { $0.sink == "fcm" }.count == 2)
    }

    @Test func rulesAddAndRemoveSinks() throws {
        let router = try NotificationRouter(
            sinks: Self.sinks,
            rules: [
                try RoutingRule.parse("type=violation => +webhook:moderation"),
                try RoutingRule.parse("type=hot distribution=information => -fcm"),
            ])
        let violation = router.plan(notification(type: "violation"), for: recipient(UserSettings()), at: now)
        #expect(violation.filter { $0.sink == "webhook:moderation" }.count == 1, "a per-user extra sink is one delivery per user")
        #expect(violation.filter { $0.sink == "fcm" }.count == 2)
        let silentHot = router.plan(notification(type: "hot", distribution: .information), for: recipient(UserSettings()), at: now)
        #expect(silentHot.map(\.sink) == ["history"])
        let loudHot = router.plan(notification(type: "hot"), for: recipient(UserSettings()), at: now)
        #expect(loudHot.filter { $0.sink == "fcm" }.count == 2)
        // Extra sinks ignore push settings: moderation must see violations of muted users too.
        let muted = router.plan(notification(type: "violation"), for: recipient(UserSettings(enabled: false)), at: now)
        #expect(muted.map(\.sink).sorted() == ["history", "webhook:moderation"])
    }

    @Test func rulesMustNameConfiguredSinksAndKeepHistory() {
        #expect(throws: HeraldError.self) { try NotificationRouter(sinks: Self.sinks, rules: [try RoutingRule.parse("type=hot => +pager")]) }
        #expect(throws: HeraldError.self) { try NotificationRouter(sinks: Self.sinks, rules: [try RoutingRule.parse("type=hot => -history")]) }
    }

    func device(_ provider: String, _ token: String, app: String? = nil) -> Device {
        Device(id: ids.next(), userID: "u", address: DeviceAddress(provider: provider, token: token), app: app, createdAt: now, updatedAt: now)
    }

    /// Each push sink gets only its providers' devices; a device that names a sink instance
    /// goes to that instance only; one that names none goes to its provider's first sink.
    @Test func pushSinksGetOnlyTheDevicesTheyServe() throws {
        let router = try NotificationRouter(sinks: [
            .init(name: "history", capabilities: .perUser),
            .init(name: "fcm", capabilities: [.push, .topics], providers: .only(["fcm"])),
            .init(name: "fcm-staging", capabilities: [.push, .topics], providers: .only(["fcm"])),
            .init(name: "apns", capabilities: .push, providers: .only(["apns"])),
            .init(name: "console", capabilities: .push, providers: .all),
        ])
        let devices = [device("fcm", "f1"), device("fcm", "f2", app: "fcm-staging"), device("apns", "a1"), device("webpush", "w1")]
        let planned = router.plan(notification(), for: RecipientContext(userID: "u", devices: devices), at: now)
        func tokens(_ sink: String) -> [String] {
            planned.filter { $0.sink == sink }.compactMap { delivery in devices.first { $0.id == delivery.deviceID }?.token }
        }
        #expect(tokens("fcm") == ["f1"])
        #expect(tokens("fcm-staging") == ["f2"])
        #expect(tokens("apns") == ["a1"], "an APNs sink is never handed an FCM token, nor the reverse")
        #expect(tokens("console") == ["f1", "f2", "a1", "w1"], "a sink for every provider sees every device")
        #expect(planned.filter { $0.sink == "history" }.count == 1)
        #expect(router.pushSink(provider: "fcm", app: nil)?.name == "fcm")
        #expect(router.pushSink(provider: "fcm", app: "fcm-staging")?.name == "fcm-staging")
        #expect(router.pushSink(provider: "fcm", app: "apns") == nil)
        #expect(router.pushSink(provider: "webpush", app: nil) == nil)
    }

    /// A Message Hub message reaches push sinks without provider topics as one delivery per
    /// device (settings and quiet hours apply); sinks with topics get topic sends instead.
    @Test func messageHubReachesSinksWithoutTopicsPerDevice() throws {
        let router = try NotificationRouter(sinks: [
            .init(name: "history", capabilities: .perUser),
            .init(name: "fcm", capabilities: [.push, .topics], providers: .only(["fcm"])),
            .init(name: "apns", capabilities: .push, providers: .only(["apns"])),
        ])
        #expect(router.hasPushSinksWithoutTopics)
        let message = HeraldNotification(
            id: ids.next(), type: "message", title: "t", body: "d", url: nil, timestamp: now, distribution: .alert, target: .topic("c-a-s"))
        let devices = [device("fcm", "f1"), device("apns", "a1"), device("apns", "a2")]
        let planned = router.messageHubDeliveries(message, for: RecipientContext(userID: "u", devices: devices), at: now)
        #expect(planned.map(\.sink) == ["apns", "apns"])
        #expect(planned.allSatisfy { $0.distribution == .alert })
        var quiet = UserSettings()
        quiet.quietHours = QuietHours(start: "00:00", end: "23:59", tz: "UTC")
        #expect(
            router.messageHubDeliveries(message, for: RecipientContext(userID: "u", settings: quiet, devices: devices), at: now).allSatisfy {
                $0.distribution == .information
            })
        var off = UserSettings()
        off.enabled = false
        #expect(router.messageHubDeliveries(message, for: RecipientContext(userID: "u", settings: off, devices: devices), at: now).isEmpty)
        #expect(router.topicSends(message, topic: "c-a-s").map(\.sink) == ["fcm", "fcm"])
        let topicsOnly = try NotificationRouter(sinks: [.init(name: "fcm", capabilities: [.push, .topics], providers: .only(["fcm"]))])
        #expect(!topicsOnly.hasPushSinksWithoutTopics)
    }
}

@Suite struct RoutingRuleTests {
    @Test func parsesConditionsAndActions() throws {
        let rule = try RoutingRule.parse("type=hot,top distribution=alert target=user_ids topic=sports- => +console -fcm")
        #expect(rule.types == ["hot", "top"])
        #expect(rule.distribution == .alert)
        #expect(rule.targetKind == .users)
        #expect(rule.topicPrefix == "sports-")
        #expect(rule.add == ["console"])
        #expect(rule.remove == ["fcm"])
    }

    @Test(arguments: [
        "type=hot", "type=hot =>", "type => +fcm", "colour=red => +fcm", "distribution=loud => +fcm", "target=everyone => +fcm", "type=hot => fcm",
        "type=hot => +",
    ])
    func refusesMalformedRules(_ line: String) {
        #expect(throws: HeraldError.self) { try RoutingRule.parse(line) }
    }
}

@Suite struct QuietHoursTests {
    func at(_ hour: Int, _ minute: Int) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar.date(from: DateComponents(year: 2024, month: 6, day: 1, hour: hour, minute: minute))!
    }

    @Test func windowWrappingMidnight() {
        let quiet = QuietHours(start: "22:00", end: "07:00", tz: "UTC")
        #expect(quiet.contains(at(23, 0)))
        #expect(quiet.contains(at(0, 30)))
        #expect(quiet.contains(at(22, 0)))
        #expect(!quiet.contains(at(7, 0)))
        #expect(!quiet.contains(at(12, 0)))
    }

    @Test func windowUsesItsOwnZone() {
        // 03:00 UTC is 23:00 the day before in Toronto (EDT, UTC-4).
        #expect(QuietHours(start: "22:00", end: "23:30", tz: "America/Toronto").contains(at(3, 0)))
    }

    @Test(arguments: [("25:00", "07:00", "UTC"), ("22:00", "7:00", "UTC"), ("22:00", "22:00", "UTC"), ("22:00", "07:00", "Mars/Olympus")])
    func invalidWindowsAreRefused(_ start: String, _ end: String, _ tz: String) {
        #expect(throws: HeraldError.self) { try QuietHours(start: start, end: end, tz: tz).validate() }
    }
}

@Suite struct RetryPolicyTests {
    @Test func backoffDoublesIsCappedAndJittered() {
        let policy = RetryPolicy(maxAttempts: 8, baseDelay: .seconds(2), maxDelay: .seconds(60))
        #expect(policy.delay(afterAttempt: 1, jitter: 1) == .seconds(2))
        #expect(policy.delay(afterAttempt: 3, jitter: 1) == .seconds(8))
        #expect(policy.delay(afterAttempt: 20, jitter: 1) == .seconds(60))
        #expect(policy.delay(afterAttempt: 3, jitter: 0.5) == .seconds(4))
        for _ in 0..<100 {
            let delay = policy.delay(afterAttempt: 2)
            #expect(delay >= .seconds(2) && delay <= .seconds(4))
        }
    }
}

@Suite struct SettingsPatchTests {
    let types = try! NotificationTypes()

    @Test func mergesOnlyGivenFields() throws {
        var settings = UserSettings(types: ["hot": false], quietHours: QuietHours(start: "22:00", end: "07:00", tz: "UTC"))
        try SettingsPatch(types: ["upvote": false]).apply(to: &settings, types: types)
        #expect(settings.types == ["hot": false, "upvote": false])
        #expect(settings.quietHours != nil)
        try SettingsPatch(delivery: "pull", quietHours: .some(nil)).apply(to: &settings, types: types)
        #expect(settings.delivery == .pull)
        #expect(settings.quietHours == nil)
    }

    @Test func invalidPatchChangesNothing() {
        var settings = UserSettings()
        #expect(throws: HeraldError.self) { try SettingsPatch(enabled: false, delivery: "fax").apply(to: &settings, types: types) }
        #expect(settings == UserSettings())
    }

    /// A window without `tz` is read in the user's `timezone`, else UTC; its own `tz` wins.
    @Test func aWindowWithoutAZoneIsReadInTheUsersZone() {
        func at(_ hour: Int, _ minute: Int) -> Date {
            Date(timeIntervalSince1970: 1_717_200_000 + Double(hour * 3600 + minute * 60)) // 2024-06-01 00:00 UTC
        }
        let window = QuietHours(start: "22:00", end: "07:00")
        // 14:00 UTC is 23:00 in Tokyo and 10:00 in Toronto (June: EDT).
        let afternoonUTC = at(14, 0)
        #expect(UserSettings(quietHours: window, timezone: "Asia/Tokyo").inQuietHours(at: afternoonUTC))
        #expect(!UserSettings(quietHours: window, timezone: "America/Toronto").inQuietHours(at: afternoonUTC))
        #expect(!UserSettings(quietHours: window).inQuietHours(at: afternoonUTC), "no zone: UTC")
        #expect(UserSettings(quietHours: window).inQuietHours(at: at(23, 0)))
        var ownZone = window
        ownZone.tz = "America/Toronto"
        #expect(!UserSettings(quietHours: ownZone, timezone: "Asia/Tokyo").inQuietHours(at: afternoonUTC), "the window's tz wins")
        #expect(!UserSettings(timezone: "Asia/Tokyo").inQuietHours(at: afternoonUTC), "no window, no quiet hours")
    }
}
