import Foundation
import HeraldCards
import HeraldCore
import HeraldInbox
import HeraldStore
import HeraldTestSupport
import HeraldTopics
import Testing

/// Many writers of a few users' rows at once, every kind the API and the workers run (devices
/// registered, moved, trimmed, unregistered and pruned, users erased, accepts with pushes,
/// topic sends inline and as fan-out jobs, subscriptions, claims and records reporting devices
/// gone, history written under leases, read marks, leases extended, card scores, seen reports
/// and promotions, settings and attributes, purges): none fails, on any engine. Each pair found
/// to deadlock on PostgreSQL has a deterministic test in `PostgresLockOrderTests`; this looks
/// for pairs nobody thought of. On the build before it every PostgreSQL run failed: deadlocks
/// between erasures, registrations, records and heartbeats, and card writes that lost their
/// user's counter to an erasure (a 500). A deadlock left (two statements over the same rows,
/// each in its plan's order) is run again, not failed.
@Suite(.cleansUp) struct ConcurrentWritersConformanceTests {
    let ids = ObjectIDGenerator()

    @Test(arguments: StoreKind.allCases)
    func writersOfTheSameUsersNeverFailEachOther(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let cards = try CardStores.on(store)
        let t0 = Date()
        _ = try await cards.putCards((0..<3).map { Card(id: "c\($0)", metadata: [:], postedAt: t0) })
        let users = (0..<4).map { "u\($0)" }
        let tokens = (0..<6).map { "tok-\($0)" }
        let handOff = DeliveryHandOff(capacity: 10_000, lease: .seconds(30))
        let tree = try await TopicTree.make(in: store, ids: ids)
        let topic = tree.optIn.topicKey
        let route: @Sendable (RecipientContext) -> [PlannedDelivery] = { context in
            [PlannedDelivery(sink: "webhook", userID: context.userID, distribution: .alert)]
                + context.devices.map { PlannedDelivery(sink: "fcm", userID: context.userID, deviceID: $0.id, distribution: .alert) }
        }

        let ids = self.ids
        let step: @Sendable (inout SystemRandomNumberGenerator) async throws -> Void = { random in
            let user = users.randomElement(using: &random) ?? "u0"
            let token = tokens.randomElement(using: &random) ?? "tok-0"
            let now = Date()
            switch Int.random(in: 0..<20, using: &random) {
            case 0, 1:
                _ = try await store.registerDevice(
                    userID: user, registration: .token(token, provider: "fcm"), newID: ids.next(), at: now,
                    keepingAtMost: Bool.random(using: &random) ? 2 : nil)
            case 2:
                _ = try await store.unregisterDevice(userID: user, provider: "fcm", addressKey: token, at: now)
            case 3:
                _ = try await store.eraseUser(userID: user, at: now)
            case 4, 5:
                let named = Array(users.shuffled(using: &random).prefix(Int.random(in: 1...3, using: &random)))
                let n = HeraldNotification(id: ids.next(), type: "comment", title: "T", body: "B", url: nil, timestamp: now, target: .users(named))
                _ = try await store.acceptUsers(n, userIDs: named, route: route, idempotency: nil, idempotencySince: now, handOff: handOff)
            case 6, 7:
                var claimed = handOff.take(max: 20)
                claimed += try await store.claimDue(now: now.addingTimeInterval(60), limit: 20, lease: .seconds(30))
                guard !claimed.isEmpty else { return }
                if Bool.random(using: &random) {
                    try await store.extendLeases(claimed.map { DeliveryLease(id: $0.id, attempt: $0.attempt) }, until: now.addingTimeInterval(30))
                }
                let updates = claimed.shuffled(using: &random).map { delivery in
                    switch Int.random(in: 0..<3, using: &random) {
                    case 0: DeliveryUpdate(id: delivery.id, state: .delivered, attempts: delivery.attempt)
                    case 1:
                        DeliveryUpdate(
                            id: delivery.id, state: .failed, attempts: delivery.attempt, lastError: "gone",
                            removeDevice: delivery.recipient.device?.id)
                    default: DeliveryUpdate(id: delivery.id, state: .pending, attempts: delivery.attempt, lastError: "503", nextAttemptAt: now)
                    }
                }
                // The history sink writes its rows under its leases, then records them.
                let history = claimed.filter { $0.sink == "history" }
                if !history.isEmpty {
                    try await store.appendHistory(
                        history.map { (notificationID: $0.notification.id, userID: $0.recipient.userID) }, at: now,
                        leases: history.map { DeliveryLease(id: $0.id, attempt: $0.attempt) })
                }
                try await store.record(updates, at: now)
            case 8:
                let scores = users.shuffled(using: &random).prefix(Int.random(in: 1...4, using: &random)).map {
                    ScoreUpdate(
                        userID: $0, card: "c\(Int.random(in: 0..<3, using: &random))", score: Double.random(in: 0..<1, using: &random),
                        timestamp: now.timeIntervalSince1970)
                }
                _ = try await cards.applyScores(scores)
            case 9:
                _ = try await cards.markSeen(userID: user, [SeenReport(card: "c\(Int.random(in: 0..<3, using: &random))", at: now)])
            case 10:
                _ = try await store.updateSettings(userID: user) { $0.enabled.toggle() }
            case 11:
                _ = try await store.pruneDevices(registeredBefore: now.addingTimeInterval(-0.05), limit: 3, at: now)
            case 12:
                try await store.subscribe(userID: user, topicKey: topic, at: now)
            case 13:
                try await SharedTopicStore(database: store).unsubscribe(userID: user, topicKey: topic)
            case 14:
                // A topic send, written inline or as a job for the fan-out worker.
                let n = HeraldNotification(id: ids.next(), type: "comment", title: "T", body: "B", url: nil, timestamp: now, target: .topic(topic))
                let routeWithHistory: @Sendable (RecipientContext) -> [PlannedDelivery] = { context in
                    [PlannedDelivery(sink: "history", userID: context.userID, distribution: .alert)] + route(context)
                }
                _ = try await store.acceptFanOut(
                    n, topic: topic, level: .optIn, plan: .route(routeWithHistory), extra: [], archive: nil, pageSize: 2,
                    inlineLimit: Bool.random(using: &random) ? .max : 0, idempotencySince: now)
            case 15:
                for job in try await store.pendingFanOuts(limit: 2) {
                    _ = try await store.writeFanOutPage(of: job.notification.id, pageSize: 2, route: route)
                }
            case 16:
                let page = try await store.history(userID: user, limit: 5, before: nil)
                let changes: [InboxChange] = [.read, .unread, .seen, .archived, .unarchived, .snooze(until: now.addingTimeInterval(0.2))]
                let inbox = SharedInboxStore(database: store)
                _ = try await inbox.mark(userID: user, .ids(page.items.map(\.notificationID)), changes.randomElement(using: &random) ?? .read, at: now)
                if Bool.random(using: &random) { _ = try await inbox.mark(userID: user, .all(type: nil, before: nil), .read, at: now) }
                _ = try await inbox.endSnoozes(dueBy: Date(), limit: 10)
            case 17:
                try await store.setAttributes(UserAttributes(region: "r\(Int.random(in: 0..<3, using: &random))"), userID: user)
            case 18:
                _ = try await cards.promote(userID: user, at: now)
            default:
                _ = try await store.purgeFinishedDeliveries(before: now, limit: 20)
                _ = try await store.purgeHistory(before: now.addingTimeInterval(-0.5), limit: 20)
            }
        }

        let failures = await withTaskGroup(of: [String].self) { group in
            for _ in 0..<12 {
                group.addTask {
                    var random = SystemRandomNumberGenerator()
                    var failures: [String] = []
                    for _ in 0..<60 {
                        do {
                            try await step(&random)
                        } catch {
                            failures.append(String(reflecting: error))
                        }
                    }
                    return failures
                }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
        #expect(failures.isEmpty, "\(failures.count) of 720 operations failed: \(failures.prefix(12).map { $0.prefix(900) }.joined(separator: "\n\n"))")
        // Accepts, fan-outs, the history sink, marks, purges and erasures all moved them.
        #expect(try await InboxRecount.mismatches(in: store) == [])
    }
}
