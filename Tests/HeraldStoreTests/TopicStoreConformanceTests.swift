import Foundation
import HeraldCards
import HeraldCore
import HeraldStore
import HeraldTestSupport
import HeraldTopics
import Testing

/// The topics module's hierarchy and subscriptions (SharedTopicStore), and the fan-out and
/// archive they feed, on every storage engine.
@Suite(.cleansUp) struct TopicStoreConformanceTests {
    let ids = ObjectIDGenerator()

    func tree(_ store: any ServerStorage) async throws -> TopicTree {
        try await TopicTree.make(in: store, ids: ids)
    }

    @Test(arguments: StoreKind.allCases)
    func hierarchyCRUD(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let topics = SharedTopicStore(database: store)
        let t = try await tree(store)
        #expect(try await topics.createArea(Area(id: ids.next(), name: "x", desc: ""), channelID: ids.next()) == false)
        #expect(try await topics.createSubject(t.forced, channelID: t.channel.id, areaID: ids.next()) == false)
        let channels = try await topics.channels()
        #expect(channels.count == 1)
        #expect(channels[0].areas.map(\.name) == ["a"])
        #expect(channels[0].areas[0].subjects.map(\.name) == ["f", "o"])
        #expect(try await topics.updateArea(channelID: t.channel.id, areaID: t.area.id, HierarchyFields(name: "a2"))?.desc == "ad")
        #expect(try await topics.updateArea(channelID: ids.next(), areaID: t.area.id, HierarchyFields(name: "x")) == nil)
        let updated = try await topics.updateSubject(
            channelID: t.channel.id, areaID: t.area.id, subjectID: t.optIn.id, HierarchyFields(opt: .init(level: .recommended, distribution: .information)))
        #expect(updated?.opt == SubjectOptions(level: .recommended, distribution: .information))
        #expect(try await store.subject(topicKey: t.optIn.topicKey)?.area == "a2")
        #expect(try await topics.deleteSubject(channelID: t.channel.id, areaID: t.area.id, subjectID: t.optIn.id))
        #expect(try await topics.deleteSubject(channelID: t.channel.id, areaID: t.area.id, subjectID: t.optIn.id) == false)
        #expect(try await topics.deleteArea(channelID: t.channel.id, areaID: t.area.id))
        #expect(try await topics.channels()[0].areas.isEmpty)
        #expect(try await store.subject(topicKey: t.forced.topicKey) == nil, "deleting an area deletes its subjects")
    }

    @Test(arguments: StoreKind.allCases)
    func fanOutReachesSubscribersOrEveryoneForForced(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let t = try await tree(store)
        for user in ["a", "b"] { _ = try await store.updateSettings(userID: user) { _ in } }
        try await store.subscribe(userID: "c", topicKey: t.optIn.topicKey, at: Date())
        func fanOut(_ subject: Subject) async throws -> (AcceptResult, HeraldNotification) {
            let n = HeraldNotification(id: ids.next(), type: "message", title: "t", body: "d", url: nil, timestamp: Date(), target: .topic(subject.topicKey))
            let result = try await store.acceptFanOut(
                n, topic: subject.topicKey, level: subject.opt.level, plan: .historyOnly,
                extra: [PlannedDelivery(sink: "fcm", userID: "", topic: subject.topicKey, distribution: .alert)],
                archive: ArchivedMessage(
                    msiKey: n.id.hex, topicKey: subject.topicKey, title: "t", desc: "d", message: "m", distribution: .alert, timestamp: 1, sender: "s"),
                pageSize: 1, idempotencySince: Date().addingTimeInterval(-60)
            )
            return (result, n)
        }
        let (forced, _) = try await fanOut(t.forced)
        #expect(forced.receipt.recipients == 3, "Forced reaches every known user: a, b and c")
        let (optIn, n) = try await fanOut(t.optIn)
        #expect(optIn.receipt.recipients == 1)
        let deliveries = try #require(try await store.status(of: n.id)?.deliveries)
        #expect(deliveries.map(\.sink).sorted() == ["fcm", "history"])
        // History is written with the message itself, not queued.
        #expect(deliveries.first { $0.sink == "history" }?.state == .delivered)
        #expect(try await store.history(userID: "c", limit: 10, before: nil).items.map(\.notificationID).contains(n.id))
        #expect(deliveries.first { $0.sink == "fcm" }?.topic == t.optIn.topicKey)
        let claimed = try await store.claimDue(now: Date().addingTimeInterval(1), limit: 100, lease: .seconds(30))
        #expect(claimed.filter { $0.recipient.topic == t.optIn.topicKey }.count == 1, "topic sends carry their topic")

        let routed = HeraldNotification(id: ids.next(), type: "hot", title: "t", body: "", url: nil, timestamp: Date(), target: .topic(t.optIn.topicKey))
        let result = try await store.acceptFanOut(
            routed, topic: t.optIn.topicKey, level: .optIn, plan: .route { [PlannedDelivery(sink: "history", userID: $0.userID, distribution: .alert)] },
            extra: [], archive: nil, pageSize: 1, idempotencySince: Date().addingTimeInterval(-60)
        )
        #expect(result.receipt.recipients == 1)

        let page = try await store.messages(topicKey: nil, limit: 1, before: nil)
        #expect(page.messages.map(\.topicKey) == [t.optIn.topicKey])
        let rest = try await store.messages(topicKey: nil, limit: 5, before: page.next)
        #expect(rest.messages.map(\.topicKey) == [t.forced.topicKey])
        #expect(rest.next == nil)
        #expect(try await store.messages(topicKey: t.forced.topicKey, limit: 5, before: nil).messages.count == 1)
    }

    @Test(arguments: StoreKind.allCases)
    func recommendedAtFirstRegistrationOnly(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let topics = SharedTopicStore(database: store)
        let t = try await tree(store)
        _ = try await topics.updateSubject(
            channelID: t.channel.id, areaID: t.area.id, subjectID: t.optIn.id, HierarchyFields(opt: .init(level: .recommended, distribution: .alert)))
        _ = try await store.registerDevice(userID: "u", registration: .token("t1", provider: "fcm"), newID: ids.next(), at: Date())
        #expect(try await topics.subscriptions(userID: "u").map(\.subscribed) == [true, true])
        try await topics.unsubscribe(userID: "u", topicKey: t.optIn.topicKey)
        _ = try await store.registerDevice(userID: "u", registration: .token("t2", provider: "fcm"), newID: ids.next(), at: Date())
        #expect(try await topics.subscriptions(userID: "u").map(\.subscribed) == [true, false])
    }

    /// Channels, areas and subjects list in the order they were created, whatever their ids.
    @Test(arguments: StoreKind.allCases)
    func hierarchyListsInCreationOrder(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let topics = SharedTopicStore(database: store)
        let later = ids.next()
        let earlier = ids.next()
        try await topics.createChannel(Channel(id: earlier, name: "second", desc: ""))
        try await topics.createChannel(Channel(id: later, name: "first", desc: ""))
        #expect(later.hex < earlier.hex)
        for (name, id) in [("z", ids.next()), ("y", ids.next())].reversed() {
            #expect(try await topics.createArea(Area(id: id, name: name, desc: ""), channelID: later))
        }
        let channels = try await topics.channels()
        #expect(channels.map(\.name) == ["second", "first"])
        #expect(channels[1].areas.map(\.name) == ["y", "z"])
        #expect(channels[0].areas.isEmpty)
    }

    /// Subscribing twice keeps one row; deleting a subject or its area takes its subscriptions
    /// with it; a Forced subject lists as subscribed without a row.
    @Test(arguments: StoreKind.allCases)
    func subscriptionsFollowTheirSubjects(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let topics = SharedTopicStore(database: store)
        let t = try await tree(store)
        for _ in 0..<2 { try await topics.subscribe(userID: "u", topicKey: t.optIn.topicKey, at: Date()) }
        #expect(try await store.isSubscribed(userID: "u", topicKey: t.optIn.topicKey))
        #expect(try await !store.isSubscribed(userID: "u", topicKey: t.forced.topicKey), "Forced reaches everyone without a row")
        let listed = try await topics.subscriptions(userID: "u")
        #expect(listed.map(\.entry.subject.name) == ["f", "o"])
        #expect(listed.map(\.subscribed) == [true, true])
        #expect(listed.first?.entry.channel == "c")
        #expect(try await topics.subscriptions(userID: "someone else").map(\.subscribed) == [true, false])
        #expect(try await store.recipients(userIDs: ["u"]).first?.userID == "u", "subscribing gives the user a row")

        #expect(try await !topics.deleteArea(channelID: ids.next(), areaID: t.area.id), "an area is deleted only in its own channel")
        #expect(try await topics.deleteSubject(channelID: t.channel.id, areaID: t.area.id, subjectID: t.optIn.id))
        #expect(try await !store.isSubscribed(userID: "u", topicKey: t.optIn.topicKey))

        let again = try await TopicTree.make(in: topics, ids: ids)
        try await topics.subscribe(userID: "u", topicKey: again.optIn.topicKey, at: Date())
        #expect(try await topics.deleteArea(channelID: again.channel.id, areaID: again.area.id))
        #expect(try await !store.isSubscribed(userID: "u", topicKey: again.optIn.topicKey))
        try await topics.subscribe(userID: "u", topicKey: t.forced.topicKey, at: Date())
        try await topics.unsubscribe(userID: "u", topicKey: t.forced.topicKey)
        #expect(try await !store.isSubscribed(userID: "u", topicKey: t.forced.topicKey))
    }

    /// The module's erasure step deletes the user's subscriptions in the erasure and counts them.
    @Test(arguments: StoreKind.allCases)
    func erasureDeletesAndCountsSubscriptions(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let topics = SharedTopicStore(database: store)
        let t = try await tree(store)
        try await topics.subscribe(userID: "u", topicKey: t.optIn.topicKey, at: Date())
        try await topics.subscribe(userID: "u", topicKey: t.forced.topicKey, at: Date())
        try await topics.subscribe(userID: "v", topicKey: t.optIn.topicKey, at: Date())
        let erased = try await store.eraseUser(userID: "u", at: Date())
        #expect(erased.subscriptions == 2)
        #expect(try await !store.isSubscribed(userID: "u", topicKey: t.optIn.topicKey))
        #expect(try await store.isSubscribed(userID: "v", topicKey: t.optIn.topicKey))
    }

    /// A store opened without the topics module keeps subscriptions through an erasure: the
    /// reason the server always opens it with StorageLocation.builtInModules.
    @Test func withoutTheModuleErasureLeavesSubscriptions() async throws {
        let store = try await StoreKind.sqliteMemory.make(modules: [.cards])
        let t = try await tree(store)
        try await SharedTopicStore(database: store).subscribe(userID: "u", topicKey: t.optIn.topicKey, at: Date())
        #expect(try await store.eraseUser(userID: "u", at: Date()).subscriptions == 0)
        #expect(try await store.isSubscribed(userID: "u", topicKey: t.optIn.topicKey))
    }
}
