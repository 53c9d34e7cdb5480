import Foundation
import HeraldCore
import Testing

/// Which deliveries the router marks to fold (docs/timing.md): pushes of capped types, a
/// sender's `digest_key`, alerts in quiet hours that hold; never history, never a critical type
/// or a Forced subject's message (a `digest_key` is the sender's own ask and still folds).
struct FoldingRouterTests {
    let ids = ObjectIDGenerator()
    // 2023-11-14T22:13:20Z
    let now = Date(timeIntervalSince1970: 1_700_000_000)

    func router() throws -> NotificationRouter {
        var router = try NotificationRouter(sinks: [
            NotificationRouter.Sink(name: "history", capabilities: .perUser),
            NotificationRouter.Sink(name: "fcm", capabilities: [.push, .topics], providers: .only(["fcm"])),
            NotificationRouter.Sink(name: "webhook:moderation", capabilities: .perUser),
        ])
        router.folding = Folding(caps: [FrequencyCap(name: "votes", types: ["upvote", "like"], max: 3, seconds: 3600)], critical: ["alert"])
        return router
    }

    func notification(_ type: String, digestKey: String? = nil) -> HeraldNotification {
        var notification = HeraldNotification(id: ids.next(), type: type, title: "t", body: "b", url: nil, timestamp: now, target: .users(["u"]))
        if let digestKey { (notification.digestKey, notification.digestWindow) = (digestKey, 600) }
        return notification
    }

    func recipient(_ settings: UserSettings = UserSettings(), level: SubscriptionLevel? = nil) -> RecipientContext {
        var recipient = RecipientContext(
            userID: "u", settings: settings,
            devices: [Device(id: ids.next(), userID: "u", address: DeviceAddress(provider: "fcm", token: "t"), createdAt: now, updatedAt: now)])
        recipient.subjectLevel = level
        return recipient
    }

    func marks(_ planned: [PlannedDelivery]) -> [String: String] {
        Dictionary(uniqueKeysWithValues: planned.map { ($0.sink, $0.fold?.key ?? "-") })
    }

    @Test func aCappedTypesPushesAreMarkedAndNothingElse() throws {
        let router = try router()
        #expect(marks(router.plan(notification("upvote"), for: recipient(), at: now)) == ["history": "-", "fcm": "cap:votes"])
        #expect(router.plan(notification("upvote"), for: recipient(), at: now).first { $0.sink == "fcm" }?.fold?.max == 3)
        #expect(marks(router.plan(notification("comment"), for: recipient(), at: now)) == ["history": "-", "fcm": "-"], "not a capped type")
        #expect(marks(router.plan(notification("alert"), for: recipient(), at: now))["fcm"] == "-", "critical")
        #expect(marks(router.plan(notification("like"), for: recipient(level: .forced), at: now))["fcm"] == "-", "a Forced subject's")
    }

    @Test func aDigestKeyFoldsEveryPushForItsWindow() throws {
        let router = try router()
        let planned = router.plan(notification("alert", digestKey: "chat-1"), for: recipient(), at: now)
        let push = try #require(planned.first { $0.sink == "fcm" })
        #expect(push.fold == FoldMark(key: "key:chat-1", max: 0, seconds: 600), "the sender's ask, critical or not")
        #expect(planned.first { $0.sink == "history" }?.fold == nil)
    }

    @Test func quietHoursThatHoldKeepAlertsUntilTheirEnd() throws {
        let router = try router()
        // 22:13 UTC is inside 22:00-07:00.
        var settings = UserSettings()
        settings.quietHours = QuietHours(start: "22:00", end: "07:00", tz: "UTC", mode: "hold")
        let planned = router.plan(notification("comment"), for: recipient(settings), at: now)
        let push = try #require(planned.first { $0.sink == "fcm" })
        #expect(push.fold?.key == FoldMark.quietHoursKey)
        #expect(push.fold?.until == Date(timeIntervalSince1970: 1_700_031_600), "07:00 UTC the next morning")
        #expect(push.distribution == .alert, "held, it goes out as an alert")
        #expect(planned.first { $0.sink == "history" }?.distribution == .information)
        // Critical: not held, silent as in any quiet hours.
        let critical = router.plan(notification("alert"), for: recipient(settings), at: now).first { $0.sink == "fcm" }
        #expect(critical?.fold == nil && critical?.distribution == .information)
        // Silent mode (the default): nothing held.
        settings.quietHours?.mode = nil
        #expect(router.plan(notification("comment"), for: recipient(settings), at: now).allSatisfy { $0.fold == nil })
    }

    @Test func marksAndWindowsReadBackAsStored() throws {
        let capped = FoldMark(key: "cap:a|b", max: 3, seconds: 3600)
        #expect(FoldMark(stored: capped.stored) == capped)
        let held = FoldMark(key: FoldMark.quietHoursKey, max: 0, until: now)
        #expect(FoldMark(stored: held.stored) == held)
        #expect(FoldMark(stored: "x") == nil && FoldMark(stored: "1|||k") == nil && FoldMark(stored: "-1|5||k") == nil)
        #expect(WindowLength("90s").seconds == 90 && WindowLength("10m").seconds == 600 && WindowLength("1h").seconds == 3600)
        #expect(WindowLength("42").seconds == 42 && WindowLength("7d").seconds == 604_800)
        for bad in ["0", "0s", "8d", "", "s", "1.5", "-5", "10 m", "1w", "9999999999"] { #expect(WindowLength(bad).seconds == nil, "\(bad)") }
    }
}
