import Foundation
import HeraldFeedRuleVectors
import HeraldFeedRules
import OpenAPIAsyncHTTPClient
import Testing

@testable import HeraldKit

/// A Herald whose state is in memory and whose server is never asked: the rules the device
/// applies on its own.
func offlineHerald(app: AppIdentity = AppIdentity(), now: @escaping @Sendable () -> Date = { Date() }) throws -> Herald {
    let secrets = FileSecretStore(url: FileManager.default.temporaryDirectory.appendingPathComponent("heraldkit-unused-\(UUID().uuidString)"))
    return Herald(
        serverURL: URL(fileURLWithPath: "/"), transport: AsyncHTTPClientTransport(), database: try LocalDatabase(), secrets: secrets, app: app,
        now: now)
}

@Suite struct LocalRulesTests {
    /// The same vectors the server's tests check (Clients/HeraldFeedRules): the device shows
    /// what `GET /feed/next` would, without telling the server its region or version.
    @Test func theDevicesFeedAnswersEveryCheckAsTheServerDoes() throws {
        let feed = try FeedRuleVectors.load().eligibility
        let messages = feed.messages.map {
            FeedMessage(
                id: $0.id, title: $0.id, body: "", url: nil, postedAt: $0.postedAt, expiresAt: $0.expiresAt, priority: $0.priority,
                targetRegions: $0.targetRegions, targetVersion: $0.targetVersion)
        }
        #expect(feed.checks.count >= 5)
        for check in feed.checks {
            let herald = try offlineHerald(app: AppIdentity(version: check.version, region: check.region), now: { feed.now })
            try herald.storeFeed(messages, etag: "\"v1\"")
            for id in check.read { try herald.markFeedMessageRead(id) }
            #expect(try herald.eligibleFeedMessages().map(\.id) == check.eligible, "\(check)")
            #expect(try herald.nextFeedMessage()?.id == check.next, "\(check)")
        }
    }

    @Test func rangesAndVersionsReadAsTheServerReadsThem() throws {
        let vectors = try FeedRuleVectors.load()
        for vector in vectors.ranges {
            let version = try #require(SemanticVersion(vector.version))
            #expect(try VersionRange(vector.range).isSatisfied(by: version) == vector.satisfied, "\(vector.range) with \(vector.version)")
        }
        for text in vectors.invalidRanges { #expect(throws: VersionRange.ParseError.self) { try VersionRange(text) } }
    }

    /// Receipts of messages gone from the feed are dropped when the feed is replaced.
    @Test func receiptsOfMessagesGoneFromTheFeedAreCleanedUp() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let herald = try offlineHerald(now: { now })
        func message(_ id: String) -> FeedMessage {
            FeedMessage(
                id: id, title: id, body: "", url: nil, postedAt: now, expiresAt: now.addingTimeInterval(60), priority: 0, targetRegions: ["CA"],
                targetVersion: nil)
        }
        try herald.storeFeed([message("a"), message("b")], etag: "\"1\"")
        try herald.markFeedMessageRead("a")
        try herald.markFeedMessageRead("b")
        #expect(try herald.nextFeedMessage() == nil)
        try herald.storeFeed([message("b"), message("c")], etag: "\"2\"")
        #expect(try herald.feedReceiptCount() == 1)
        #expect(try herald.nextFeedMessage()?.id == "c")
    }

    /// The seed's pool rules: the latest timestamp wins, a seen card ignores scores, promotion
    /// takes the top score (ties by card id) and queues one seen report.
    @Test func poolRulesHoldOnTheDevice() throws {
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let herald = try offlineHerald(now: { t0 })
        try herald.setScore(0.5, forCard: "b", at: t0)
        try herald.setScore(0.9, forCard: "a", at: t0.addingTimeInterval(10))
        try herald.setScore(0.1, forCard: "a", at: t0.addingTimeInterval(5))
        try herald.setScore(0.9, forCard: "c", at: t0)
        #expect(try herald.pool().map(\.card) == ["a", "c", "b"], "an older score never replaces a newer one; ties by id")
        #expect(try herald.promote()?.card.id == "a")
        try herald.setScore(5, forCard: "a", at: t0.addingTimeInterval(60))
        #expect(try herald.pool().map(\.card) == ["c", "b"], "a seen card ignores scores")
        #expect(try herald.promote()?.card.id == "c")
        #expect(try herald.promote()?.card.id == "b")
        #expect(try herald.promote() == nil)
        #expect(try herald.seenCards().map(\.card.id) == ["a", "c", "b"])
        try herald.markSeen(card: "a")
        #expect(try herald.outbox.counts().waiting == 3, "one seen report a card, however often it is seen")
    }

    @Test func eventsQueueWithFreshIdsAndRefuseWhatHeraldWould() throws {
        let herald = try offlineHerald()
        try herald.identify(["plan": "free"])
        try herald.focus(card: "c1")
        try herald.react(.tfu, card: "c1")
        try herald.track("opened_settings", properties: ["from": "menu", "count": 2])
        #expect(try herald.outbox.counts().waiting == 4)
        #expect(throws: HeraldKitError.self) { try herald.track("") }
        #expect(throws: HeraldKitError.self) { try herald.track(String(repeating: "x", count: 129)) }
        #expect(try herald.outbox.counts().waiting == 4)
    }

    /// What Herald would refuse is refused on the device, before anything is queued or sent.
    @Test func badArgumentsAreRefusedBeforeTheNetwork() async throws {
        let herald = try offlineHerald()
        struct NotJSON: Sendable {}
        #expect(throws: HeraldKitError.self) { try herald.track("opened", properties: ["what": NotJSON()]) }
        #expect(try herald.outbox.counts().waiting == 0)
        await #expect(throws: HeraldKitError.invalidArgument("'nonsense' is not a notification type")) {
            try await herald.markAll(.read, type: "nonsense")
        }
    }

    @Test func theDeviceSecretFileIsTheOwnersAlone() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("heraldkit-secret-\(UUID().uuidString)")
        let store = FileSecretStore(url: url)
        #expect(try store.load() == nil)
        try store.save("s3cret")
        #expect(try store.load() == "s3cret")
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? NSNumber)
        #expect(mode.intValue & 0o777 == 0o600)
        try store.save("other")
        #expect(try store.load() == "other")
        try store.remove()
        #expect(try store.load() == nil)
    }
}
