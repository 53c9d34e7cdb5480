import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

/// Fan-outs above the inline limit on every storage engine: the accept commits the notification
/// and a cursor, pages written afterwards add up to exactly what an inline fan-out writes, and a
/// crash or a second writer never duplicates a row.
@Suite(.cleansUp) struct FanOutJobConformanceTests {
    let ids = ObjectIDGenerator()
    let users = (1...7).map { "u\($0)" }

    /// Seven users, u1-u5 subscribed to the opt-in subject; odd users have a device; u2 and u3
    /// are gold tier.
    func prepare(_ store: any ServerStorage) async throws -> TopicTree {
        let tree = try await TopicTree.make(in: store, ids: ids)
        for (index, user) in users.enumerated() {
            _ = try await store.updateSettings(userID: user) { _ in }
            if index % 2 == 0 {
                _ = try await store.registerDevice(userID: user, registration: .token("tok-\(user)", provider: "fcm"), newID: ids.next(), at: Date())
            }
            if index < 5 { try await store.subscribe(userID: user, topicKey: tree.optIn.topicKey, at: Date()) }
            if user == "u2" || user == "u3" { try await store.setAttributes(UserAttributes(tierID: "gold"), userID: user) }
        }
        return tree
    }

    /// What the router would plan: a history row per user and a push per device.
    let route: @Sendable (RecipientContext) -> [PlannedDelivery] = { recipient in
        [PlannedDelivery(sink: "history", userID: recipient.userID, distribution: .alert)]
            + recipient.devices.map { PlannedDelivery(sink: "fcm", userID: recipient.userID, deviceID: $0.id, distribution: .alert) }
    }

    struct Row: Hashable, Comparable {
        var sink: String
        var user: String
        var device: String
        var state: String
        static func < (a: Row, b: Row) -> Bool { (a.sink, a.user, a.device, a.state) < (b.sink, b.user, b.device, b.state) }
    }

    /// The notification's deliveries and the users whose history holds it.
    func written(_ store: any ServerStorage, _ id: ObjectID) async throws -> (rows: [Row], history: [String]) {
        let deliveries = try #require(try await store.status(of: id)).deliveries
        var history: [String] = []
        for user in users where try await store.history(userID: user, limit: 50, before: nil).items.contains(where: { $0.notificationID == id }) {
            history.append(user)
        }
        return (deliveries.map { Row(sink: $0.sink, user: $0.userID, device: $0.deviceID?.hex ?? "", state: $0.state.rawValue) }.sorted(), history)
    }

    func notification(_ target: NotificationTarget) -> HeraldNotification {
        HeraldNotification(id: ids.next(), type: "generic", title: "t", body: "b", url: nil, timestamp: Date(), target: target)
    }

    enum Case: String, CaseIterable, Sendable {
        case routedTopic, historyOnly, historyAndDevices, forced, audience
    }

    /// What the router plans for a Message Hub message's subscribers with devices.
    let devicesOnly: @Sendable (RecipientContext) -> [PlannedDelivery] = { recipient in
        recipient.devices.map { PlannedDelivery(sink: "fcm", userID: recipient.userID, deviceID: $0.id, distribution: .alert) }
    }

    /// Accepts `n` for `c` with the given inline limit.
    func accept(_ store: any ServerStorage, _ n: HeraldNotification, _ c: Case, _ tree: TopicTree, inlineLimit: Int) async throws -> AcceptResult {
        let since = Date().addingTimeInterval(-60)
        let (subject, plan): (Subject, FanOutPlan)
        switch c {
        case .audience:
            return try await store.acceptAudience(
                n, audience: Audience(tierIDs: ["gold"], userIDs: ["u7", "u3"]), route: route, pageSize: 2, inlineLimit: inlineLimit, idempotency: nil,
                idempotencySince: since)
        case .routedTopic: (subject, plan) = (tree.optIn, .route(route))
        case .historyOnly: (subject, plan) = (tree.optIn, .historyOnly)
        case .historyAndDevices: (subject, plan) = (tree.optIn, .historyAndDevices(devicesOnly))
        case .forced: (subject, plan) = (tree.forced, .route(route))
        }
        let extra = c == .historyOnly ? [PlannedDelivery(sink: "fcm", userID: "", topic: subject.topicKey, distribution: .alert)] : []
        return try await store.acceptFanOut(
            n, topic: subject.topicKey, level: subject.opt.level, plan: plan, extra: extra, archive: nil, pageSize: 2, inlineLimit: inlineLimit,
            idempotency: nil, idempotencySince: since)
    }

    /// The route a worker would rebuild for the job's kind.
    func route(for kind: FanOutKind) -> @Sendable (RecipientContext) -> [PlannedDelivery] {
        switch kind {
        case .route: route
        case .history: { _ in [] }
        case .historyAndDevices: devicesOnly
        }
    }

    @Test(arguments: StoreKind.allCases, Case.allCases)
    func pagesWrittenLaterAddUpToTheInlineFanOut(_ kind: StoreKind, _ c: Case) async throws {
        let store = try await kind.make()
        let tree = try await prepare(store)
        let inline = notification(.topic(tree.optIn.topicKey))
        let inlineReceipt = try await accept(store, inline, c, tree, inlineLimit: .max).receipt
        #expect(try await store.status(of: inline.id)?.fanOut == nil, "an inline fan-out has no job")
        let expected = try await written(store, inline.id)
        // Every kind writes its recipients' history rows with its deliveries, as an accept for
        // users does: none is left for the history sink.
        #expect(!expected.history.isEmpty && expected.rows.allSatisfy { $0.sink != "history" || $0.state == "delivered" })

        let later = notification(.topic(tree.optIn.topicKey))
        let receipt = try await accept(store, later, c, tree, inlineLimit: 1).receipt
        #expect(receipt.recipients == inlineReceipt.recipients, "the 202 counts the recipients at accept time")
        let accepted = try #require(try await store.status(of: later.id))
        #expect(accepted.recipients == inlineReceipt.recipients)
        #expect(accepted.fanOut == FanOutProgress(recipients: inlineReceipt.recipients, written: 0, done: false))
        let extraOnly = c == .historyOnly ? [Row(sink: "fcm", user: "", device: "", state: "pending")] : []
        #expect(try await written(store, later.id).rows == extraOnly, "only the topic sends are written with the accept")

        let job = try #require(try await store.pendingFanOuts(limit: 10).first { $0.notification.id == later.id })
        #expect(job.kind == (c == .historyOnly ? .history : c == .historyAndDevices ? .historyAndDevices : .route))
        #expect(job.notification.target == later.target && job.notification.title == later.title, "the job carries its notification to plan with")
        var pages = 0
        while let progress = try await store.writeFanOutPage(of: later.id, pageSize: 2, route: route(for: job.kind)), !progress.done {
            pages += 1
            #expect(progress.written == min(pages * 2, inlineReceipt.recipients))
        }
        #expect(
            try await store.status(of: later.id)?.fanOut == FanOutProgress(recipients: inlineReceipt.recipients, written: inlineReceipt.recipients, done: true))
        #expect(try await store.pendingFanOuts(limit: 10).isEmpty)
        let result = try await written(store, later.id)
        #expect(result.rows == expected.rows)
        #expect(result.history == expected.history)
        // A finished job stays finished: another page writes nothing.
        #expect(try await store.writeFanOutPage(of: later.id, pageSize: 2, route: route)?.done == true)
        #expect(try await written(store, later.id).rows == expected.rows)
        #expect(try await store.writeFanOutPage(of: ids.next(), pageSize: 2, route: route) == nil, "no job, no progress")
    }

    /// The cursor is committed with each page: whoever continues a job (another process after a
    /// crash, or two writers racing) starts after the last committed page; no row is written twice.
    @Test(arguments: StoreKind.allCases)
    func aResumedOrRacedJobWritesEachRecipientOnce(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let tree = try await prepare(store)
        let n = notification(.topic(tree.forced.topicKey))
        _ = try await accept(store, n, .forced, tree, inlineLimit: 1)
        #expect(try await store.writeFanOutPage(of: n.id, pageSize: 3, route: route)?.written == 3)
        // What another process sees after this one died: the job with its committed progress.
        let pending = try #require(try await store.pendingFanOuts(limit: 10).first)
        #expect(pending.progress == FanOutProgress(recipients: 7, written: 3, done: false))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    while let progress = try await store.writeFanOutPage(of: n.id, pageSize: 1, route: self.route), !progress.done {}
                }
            }
            try await group.waitForAll()
        }
        let rows = try await written(store, n.id).rows
        #expect(rows.count == Set(rows).count, "no duplicate rows: \(rows)")
        #expect(rows.filter { $0.sink == "history" }.map(\.user) == users)
        #expect(rows.filter { $0.sink == "fcm" }.count == 4, "u1, u3, u5 and u7 have a device")
        #expect(try await store.status(of: n.id)?.fanOut == FanOutProgress(recipients: 7, written: 7, done: true))
    }

    /// Retention never removes a notification whose fan-out is still being written.
    @Test(arguments: StoreKind.allCases)
    func retentionKeepsAPendingFanOut(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let tree = try await prepare(store)
        let n = notification(.topic(tree.optIn.topicKey))
        _ = try await accept(store, n, .routedTopic, tree, inlineLimit: 1)
        #expect(try await store.purgeNotifications(before: Date().addingTimeInterval(3600), after: nil, limit: 100).deleted == 0)
        #expect(try await store.pendingFanOuts(limit: 10).map(\.notification.id) == [n.id])
    }
}
