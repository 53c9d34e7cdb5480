import Foundation
import HeraldCore
import HeraldFeed
import HeraldServer
import HeraldTestSupport
import Testing

/// Two Herald processes on one PostgreSQL serve the same feed: a message posted through one
/// reaches the other's in-memory snapshot at once, not on the next scheduled reload.
@Suite(.cleansUp) struct SharedFeedTests {
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "needs the PostgreSQL test server"))
    func aFeedMessagePostedThroughOneProcessReachesTheOther() async throws {
        var configuration = HeraldConfiguration()
        configuration.database = try await PostgresTestDatabase.create()
        configuration.publicBaseURL = "https://feed.example"
        configuration.logLevel = "warning"
        let first = try await HeraldServer.start(configuration)
        TestResources.register { await first.close() }
        let second = try await HeraldServer.start(configuration)
        TestResources.register { await second.close() }
        // An hour between scheduled reloads: only the change notification can bring the message.
        let maintenance = FeedMaintenance(store: second.feedStore, snapshot: second.feed, interval: .seconds(3600), logger: second.logger)
        let running = Task { try await maintenance.run() }
        defer { running.cancel() }
        // Until the second process listens, a post reaches it only by the hourly reload: post
        // probes until one arrives, so the test starts once notifications flow.
        var listening = false
        for _ in 0..<50 where !listening {
            let probe = FeedMessage(
                id: ObjectIDGenerator().next(), title: "probe", body: "b", url: nil, postedAt: Date(), expiresAt: Date().addingTimeInterval(3600),
                priority: 0, targetRegions: [], targetVersion: nil
            )
            try await first.feedStore.addFeedMessage(probe)
            for _ in 0..<20 where !listening {
                listening = second.feed.eligible(at: Date(), for: FeedQuery()).contains { $0.title == "probe" }
                if !listening { try await Task.sleep(for: .milliseconds(10)) }
            }
        }
        try #require(listening, "the second process hears feed changes")

        let now = Date()
        let message = FeedMessage(
            id: ObjectIDGenerator().next(), title: "Maintenance tonight", body: "b", url: nil, postedAt: now, expiresAt: now.addingTimeInterval(3600),
            priority: 1, targetRegions: [], targetVersion: nil
        )
        try await first.feedStore.addFeedMessage(message)
        var seen = false
        // Twenty seconds at most (it returns as soon as the message is there): under the full
        // suite's load on two cores five were seen to be too few once.
        for _ in 0..<400 where !seen {
            seen = second.feed.eligible(at: Date(), for: FeedQuery()).contains { $0.id == message.id }
            if !seen { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(seen, "the second process's snapshot has the message within 20 s")

        #expect(try await first.feedStore.deleteFeedMessage(id: message.id))
        var gone = false
        for _ in 0..<400 where !gone {
            gone = !second.feed.eligible(at: Date(), for: FeedQuery()).contains { $0.id == message.id }
            if !gone { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(gone, "and loses it when it is deleted")
    }
}
