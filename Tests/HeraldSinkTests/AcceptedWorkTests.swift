import Foundation
import HeraldCore
import HeraldHistorySink
import HeraldStore
import HeraldTestSupport
import Synchronization
import Testing

/// What an accept tells the background services: the delivery engine after every accept, the
/// fan-out worker only after one that may have left pages to write. Waking the worker for every
/// accept for users cost a read transaction per group commit and found nothing.
@Suite(.cleansUp) struct AcceptedWorkTests {
    @Test func onlyTopicAudienceAndMessageAcceptsMayLeaveFanOutWork() async throws {
        let store = try SQLiteStore(path: ":memory:")
        try await store.migrate()
        let ids = ObjectIDGenerator()
        let key = try await TopicTree.make(in: store, ids: ids).optIn.topicKey
        for user in ["a", "b", "c"] { try await store.subscribe(userID: user, topicKey: key, at: Date()) }

        let seen = Mutex<[Bool]>([])
        let sinks = try SinkRegistry([HistorySink(store: store), RecordingSink(name: "fcm", capabilities: .push)])
        var service = NotificationService(
            validator: NotificationValidator(types: try NotificationTypes(), resources: try ResourceResolver(publicBaseURL: "https://x.example")),
            router: try NotificationRouter(registry: sinks), sinks: sinks, store: store, ids: ids,
            onAccepted: { work in seen.withLock { $0.append(work.mayHaveFanOut) } }
        )
        service.fanOutInlineLimit = 1

        _ = try await service.send(NotificationSubmission(type: "comment", title: "T", body: "B", userIDs: ["a", "b"]))
        #expect(seen.withLock { $0 } == [false], "an accept for users writes every row itself")
        let fannedOut = try await service.send(NotificationSubmission(type: "hot", title: "big", topic: key)).receipt
        #expect(seen.withLock { $0 } == [false, true], "a topic above the inline limit leaves pages to write")
        #expect(try await store.pendingFanOuts(limit: 10).map(\.notification.id) == [fannedOut.id])
    }

    /// The digest worker is woken only by an accept that held a delivery: uncapped traffic
    /// leaves it nothing to count.
    @Test func onlyAnAcceptThatHeldADeliveryWakesTheDigestWorker() async throws {
        let store = try SQLiteStore(path: ":memory:")
        try await store.migrate()
        let ids = ObjectIDGenerator()
        _ = try await store.registerDevice(userID: "a", registration: .token("t-a", provider: "fcm"), newID: ids.next(), at: Date())
        let seen = Mutex<[Bool]>([])
        let sinks = try SinkRegistry([HistorySink(store: store), RecordingSink(name: "fcm", capabilities: .push)])
        var router = try NotificationRouter(registry: sinks)
        router.folding = Folding(caps: [FrequencyCap(name: "votes", types: ["upvote"], max: 1, seconds: 3600)])
        let service = NotificationService(
            validator: NotificationValidator(types: try NotificationTypes(), resources: try ResourceResolver(publicBaseURL: "https://x.example")),
            router: router, sinks: sinks, store: store, ids: ids, onAccepted: { work in seen.withLock { $0.append(work.holds) } }
        )
        _ = try await service.send(NotificationSubmission(type: "comment", title: "T", body: "B", userIDs: ["a"]))
        _ = try await service.send(NotificationSubmission(type: "upvote", title: "T", body: "B", userIDs: ["a"]))
        _ = try await service.send(NotificationSubmission(type: "upvote", title: "T", body: "B", userIDs: ["nobody"]))
        #expect(seen.withLock { $0 } == [false, true, false], "uncapped, capped (held to be counted), and capped without a push to hold")
    }
}
