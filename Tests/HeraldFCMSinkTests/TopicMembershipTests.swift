import Foundation
import HeraldCore
import HeraldFCMEmulator
import HeraldFCMSink
import HeraldStore
import HeraldTestSupport
import HeraldTopics
import Logging
import Testing

/// FCM topic membership follows Herald's subscriptions: the worker, the FCM sink's Instance ID
/// calls and the emulator, which delivers a topic message only to the topic's members.
@Suite(.cleansUp) struct TopicMembershipTests {
    let ids = ObjectIDGenerator()

    func worker(_ f: EmulatorFixture) throws -> TopicMembershipWorker {
        TopicMembershipWorker(
            store: SharedTopicMembershipStore(database: f.store), sinks: f.sinks, router: try NotificationRouter(registry: f.sinks),
            retry: RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(50)),
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
    }

    @Test func membershipFollowsSubscriptionsDevicesAndSubjects() async throws {
        let f = try await EmulatorFixture.start()
        let t = try await TopicTree.make(in: f.store, ids: ids)
        let worker = try worker(f)
        for (user, token) in [("ann", "tok-ann"), ("bob", "tok-bob"), ("cat", "dead-cat")] {
            _ = try await f.store.registerDevice(userID: user, registration: .token(token, provider: "fcm"), newID: ids.next(), at: Date())
        }
        try await worker.drain()
        #expect(f.emulator.members(of: t.forced.topicKey) == ["tok-ann", "tok-bob"], "Forced: every device; a token FCM does not know is refused")
        #expect(f.emulator.members(of: t.optIn.topicKey).isEmpty)
        #expect(try await SharedTopicMembershipStore(database: f.store).membershipCounts(sink: "fcm")[t.forced.topicKey]?.refused == 1)

        try await f.store.subscribe(userID: "ann", topicKey: t.optIn.topicKey, at: Date())
        try await worker.drain()
        #expect(f.emulator.members(of: t.optIn.topicKey) == ["tok-ann"], "opt-in")

        // Who a topic send reaches is exactly who Herald has subscribed.
        _ = try await f.service.postMessage(
            MessageSubmission(title: "Match", desc: "Tonight", message: "m", topicKey: t.optIn.topicKey, distribution: "Alert"), sender: "c")
        try await f.deliverAll()
        #expect(f.emulator.topicDeliveries(t.optIn.topicKey) == 2, "an alert is two topic messages, each reaching one member")

        try await SharedTopicStore(database: f.store).unsubscribe(userID: "ann", topicKey: t.optIn.topicKey)
        #expect(try await f.store.unregisterDevice(userID: "bob", provider: "fcm", addressKey: "tok-bob", at: Date()))
        try await worker.drain()
        #expect(f.emulator.members(of: t.optIn.topicKey).isEmpty, "opt-out")
        #expect(f.emulator.members(of: t.forced.topicKey) == ["tok-ann"], "a removed device leaves its topics")

        #expect(try await SharedTopicStore(database: f.store).deleteSubject(channelID: t.channel.id, areaID: t.area.id, subjectID: t.forced.id))
        try await worker.drain()
        #expect(f.emulator.members(of: t.forced.topicKey).isEmpty, "a deleted subject's topic is emptied")
        #expect(
            try await SharedTopicMembershipStore(database: f.store).pendingMembershipChanges(
                TopicMembershipScope(sink: "fcm", providers: ["fcm"], servesUnnamedDevices: true), limit: 10
            ).isEmpty)
        await f.stop()
    }

    @Test func largeChangesGoInCallsOfAtMostAThousandTokens() async throws {
        let f = try await EmulatorFixture.start()
        let changes =
            (0..<2_500).map { TopicMembershipChange(.add, token: "tok-\($0)", topic: "big") }
            + [TopicMembershipChange(.remove, token: "tok-0", topic: "big"), TopicMembershipChange(.remove, token: "never-added", topic: "big")]
        let outcomes = await f.sink.updateTopicMembership(changes)
        #expect(outcomes.allSatisfy { $0 == .applied }, "removing a token that is not a member leaves it so: applied")
        #expect(f.emulator.membershipRequests == 4, "3 batchAdd calls (1000, 1000, 500) and one batchRemove")
        #expect(f.emulator.members(of: "big").count == 2_499)
        await f.stop()
    }

    @Test func anUnreachableProviderIsRetriedAndNothingIsRecordedUntilItAnswers() async throws {
        let f = try await EmulatorFixture.start()
        let t = try await TopicTree.make(in: f.store, ids: ids)
        let worker = try worker(f)
        _ = try await f.store.registerDevice(userID: "ann", registration: .token("tok-ann", provider: "fcm"), newID: ids.next(), at: Date())
        f.emulator.setTokenEndpointDown(true)
        await #expect(throws: (any Error).self) { try await worker.drain() }
        #expect(try await SharedTopicMembershipStore(database: f.store).membershipCounts(sink: "fcm").isEmpty, "a change to retry is not recorded")
        f.emulator.setTokenEndpointDown(false)
        // The running worker retries with backoff by itself.
        let running = Task { try await worker.run() }
        defer { running.cancel() }
        for _ in 0..<200 where f.emulator.members(of: t.forced.topicKey).isEmpty { try await Task.sleep(for: .milliseconds(20)) }
        #expect(f.emulator.members(of: t.forced.topicKey) == ["tok-ann"])
        await f.stop()
    }
}
