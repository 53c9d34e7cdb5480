import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import HeraldTopics
import Logging
import Testing

/// The difference between what provider-side topics hold and what Herald's subscriptions say,
/// on every engine: each way a subscription, a device or a subject changes shows up in it.
@Suite(.cleansUp) struct TopicMembershipConformanceTests {
    let ids = ObjectIDGenerator()
    let fcm = TopicMembershipScope(sink: "fcm", providers: ["fcm"], servesUnnamedDevices: true)

    func settle(_ store: any ServerStorage, _ changes: [TopicMembershipChange], _ outcome: TopicMembershipOutcome = .applied) async throws {
        try await SharedTopicMembershipStore(database: store).recordMembership(sink: "fcm", changes.map { ($0, outcome) })
    }

    /// An erased user's tokens leave every provider-side topic they were in.
    @Test(arguments: StoreKind.allCases)
    func anErasedUsersTokensLeaveTheirTopics(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        defer { Task { await store.close() } }
        let t = try await TopicTree.make(in: store, ids: ids)
        _ = try await store.registerDevice(userID: "gone", registration: .token("t-gone", provider: "fcm"), newID: ids.next(), at: Date())
        try await store.subscribe(userID: "gone", topicKey: t.optIn.topicKey, at: Date())
        try await settle(store, try await SharedTopicMembershipStore(database: store).pendingMembershipChanges(fcm, limit: 10))
        _ = try await store.eraseUser(userID: "gone", at: Date())
        let removals = try await SharedTopicMembershipStore(database: store).pendingMembershipChanges(fcm, limit: 10)
        #expect(
            Set(removals)
                == [
                    TopicMembershipChange(.remove, token: "t-gone", topic: t.forced.topicKey),
                    TopicMembershipChange(.remove, token: "t-gone", topic: t.optIn.topicKey),
                ])
    }

    @Test(arguments: StoreKind.allCases)
    func theDifferenceFollowsSubscriptionsDevicesAndSubjects(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        defer { Task { await store.close() } }
        let t = try await TopicTree.make(in: store, ids: ids)
        let (forced, optIn) = (t.forced.topicKey, t.optIn.topicKey)
        #expect(try await SharedTopicMembershipStore(database: store).pendingMembershipChanges(fcm, limit: 10).isEmpty)

        _ = try await store.registerDevice(userID: "ann", registration: .token("t-ann", provider: "fcm"), newID: ids.next(), at: Date())
        _ = try await store.registerDevice(userID: "ann", registration: .token("t-ann-ios", provider: "apns"), newID: ids.next(), at: Date())
        var other = DeviceRegistration.token("t-other-app", provider: "fcm")
        other.app = "fcm-eu"
        _ = try await store.registerDevice(userID: "ann", registration: other, newID: ids.next(), at: Date())
        // Forced reaches every device in scope; another provider's and another sink's are not this sink's.
        let first = try await SharedTopicMembershipStore(database: store).pendingMembershipChanges(fcm, limit: 10)
        #expect(first == [TopicMembershipChange(.add, token: "t-ann", topic: forced)])
        let eu = TopicMembershipScope(sink: "fcm-eu", providers: ["fcm"], servesUnnamedDevices: false)
        #expect(
            try await SharedTopicMembershipStore(database: store).pendingMembershipChanges(eu, limit: 10) == [
                TopicMembershipChange(.add, token: "t-other-app", topic: forced)
            ])
        try await settle(store, first)
        #expect(try await SharedTopicMembershipStore(database: store).pendingMembershipChanges(fcm, limit: 10).isEmpty, "recorded: nothing differs")

        try await store.subscribe(userID: "ann", topicKey: optIn, at: Date())
        _ = try await store.registerDevice(userID: "bob", registration: .token("t-bob", provider: "fcm"), newID: ids.next(), at: Date())
        let second = try await SharedTopicMembershipStore(database: store).pendingMembershipChanges(fcm, limit: 10)
        #expect(Set(second) == [TopicMembershipChange(.add, token: "t-ann", topic: optIn), TopicMembershipChange(.add, token: "t-bob", topic: forced)])
        #expect(try await SharedTopicMembershipStore(database: store).pendingMembershipChanges(fcm, limit: 1).count == 1, "limit")
        try await settle(store, second)
        let counts = try await SharedTopicMembershipStore(database: store).membershipCounts(sink: "fcm")
        #expect(counts[forced]?.members == 2 && counts[optIn]?.members == 1)

        // Opting out, a device going, a subject deleted: removals.
        try await SharedTopicStore(database: store).unsubscribe(userID: "ann", topicKey: optIn)
        #expect(
            try await SharedTopicMembershipStore(database: store).pendingMembershipChanges(fcm, limit: 10) == [
                TopicMembershipChange(.remove, token: "t-ann", topic: optIn)
            ])
        #expect(try await store.unregisterDevice(userID: "bob", provider: "fcm", addressKey: "t-bob", at: Date()))
        let third = try await SharedTopicMembershipStore(database: store).pendingMembershipChanges(fcm, limit: 10)
        #expect(Set(third) == [TopicMembershipChange(.remove, token: "t-ann", topic: optIn), TopicMembershipChange(.remove, token: "t-bob", topic: forced)])
        try await settle(store, third)
        #expect(try await SharedTopicStore(database: store).deleteSubject(channelID: t.channel.id, areaID: t.area.id, subjectID: t.forced.id))
        let fourth = try await SharedTopicMembershipStore(database: store).pendingMembershipChanges(fcm, limit: 10)
        #expect(fourth == [TopicMembershipChange(.remove, token: "t-ann", topic: forced)])
        try await settle(store, fourth)
        #expect(try await SharedTopicMembershipStore(database: store).membershipCounts(sink: "fcm").isEmpty)
        #expect(try await SharedTopicMembershipStore(database: store).pendingMembershipChanges(fcm, limit: 10).isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func aRefusedAdditionIsNotTriedAgainWhileWantedAndRetriesAreNotRecorded(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        defer { Task { await store.close() } }
        let t = try await TopicTree.make(in: store, ids: ids)
        _ = try await store.registerDevice(userID: "ann", registration: .token("bad-token", provider: "fcm"), newID: ids.next(), at: Date())
        _ = try await store.registerDevice(userID: "bob", registration: .token("good-token", provider: "fcm"), newID: ids.next(), at: Date())
        let pending = try await SharedTopicMembershipStore(database: store).pendingMembershipChanges(fcm, limit: 10)
        #expect(pending.count == 2)
        try await SharedTopicMembershipStore(database: store).recordMembership(
            sink: "fcm",
            [
                (TopicMembershipChange(.add, token: "bad-token", topic: t.forced.topicKey), .refused(reason: "NOT_FOUND")),
                (TopicMembershipChange(.add, token: "good-token", topic: t.forced.topicKey), .retry(after: nil, reason: "503")),
            ])
        #expect(
            try await SharedTopicMembershipStore(database: store).pendingMembershipChanges(fcm, limit: 10) == [
                TopicMembershipChange(.add, token: "good-token", topic: t.forced.topicKey)
            ])
        let counts = try await SharedTopicMembershipStore(database: store).membershipCounts(sink: "fcm")
        #expect(counts[t.forced.topicKey]?.members == 0 && counts[t.forced.topicKey]?.refused == 1)
    }

    /// A batch larger than one statement's share (SharedTopicMembershipStore.recordChunk) is
    /// recorded whole, in one transaction; the same change twice keeps its last answer.
    @Test(arguments: StoreKind.allCases)
    func aLargeBatchIsRecordedWhole(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        defer { Task { await store.close() } }
        let members = SharedTopicMembershipStore(database: store)
        let joined = (0..<450).map { TopicMembershipChange(.add, token: "t\($0)", topic: "topic-\($0 % 3)") }
        var settled: [(change: TopicMembershipChange, outcome: TopicMembershipOutcome)] = joined.map { ($0, .applied) }
        settled.append((joined[0], .refused(reason: "")))
        settled.append((TopicMembershipChange(.add, token: "late", topic: "topic-0"), .retry(after: nil, reason: "503")))
        try await members.recordMembership(sink: "fcm", settled)
        var counts = try await members.membershipCounts(sink: "fcm")
        #expect(counts["topic-0"]?.members == 149 && counts["topic-0"]?.refused == 1)
        #expect(counts["topic-1"]?.members == 150 && counts["topic-2"]?.members == 150)
        #expect(try await members.membershipCounts(sink: "another sink").isEmpty)

        try await members.recordMembership(sink: "fcm", joined.prefix(300).map { (TopicMembershipChange(.remove, token: $0.token, topic: $0.topic), .applied) })
        counts = try await members.membershipCounts(sink: "fcm")
        #expect(counts.values.map { $0.members + $0.refused }.reduce(0, +) == 150)
        #expect(counts["topic-0"]?.refused == nil || counts["topic-0"]?.refused == 0, "the refused token was among those removed")
    }

    /// A provider's refusal is outside text: one with U+0000 (which PostgreSQL refuses) once
    /// failed the whole batch's record, so its changes were sent again at every pass.
    @Test(arguments: StoreKind.allCases)
    func aRefusalWithNULIsRecorded(_ kind: StoreKind) async throws {
        struct RefusingSink: NotificationSink {
            let name = "fcm"
            let capabilities: SinkCapabilities = [.push, .topicMembership]
            let providers = DeviceProviders.only(["fcm"])
            func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] { batch.map { _ in .delivered } }
            func updateTopicMembership(_ changes: [TopicMembershipChange]) async -> [TopicMembershipOutcome] {
                changes.map { _ in .refused(reason: "NOT_FOUND\u{0}" + String(repeating: "x", count: 100_000)) }
            }
        }
        let store = try await kind.make()
        defer { Task { await store.close() } }
        let t = try await TopicTree.make(in: store, ids: ids)
        _ = try await store.registerDevice(userID: "ann", registration: .token("bad-token", provider: "fcm"), newID: ids.next(), at: Date())
        let sinks = try SinkRegistry([RefusingSink()])
        let worker = TopicMembershipWorker(
            store: SharedTopicMembershipStore(database: store), sinks: sinks, router: try NotificationRouter(registry: sinks),
            retry: RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(50)),
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        try await worker.drain()
        #expect(try await SharedTopicMembershipStore(database: store).pendingMembershipChanges(fcm, limit: 10).isEmpty)
        #expect(try await SharedTopicMembershipStore(database: store).membershipCounts(sink: "fcm")[t.forced.topicKey]?.refused == 1)
    }
}
