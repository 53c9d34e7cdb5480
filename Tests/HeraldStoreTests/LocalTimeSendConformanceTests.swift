import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

/// Sends in each recipient's own time (`send_at_local`, docs/timing.md) on every engine: the job
/// pages the recipients at once, giving each an instant and routing nobody; each is routed when
/// theirs comes, dated then, once, and a cancel or an erasure takes those still waiting.
@Suite(.cleansUp) struct LocalTimeSendConformanceTests {
    let ids = ObjectIDGenerator()

    func notification(_ target: NotificationTarget, local: String = "09:00") -> HeraldNotification {
        var notification = HeraldNotification(id: ids.next(), type: "generic", title: "T", body: "B", url: nil, timestamp: Date(), target: target)
        notification.sendAtLocal = LocalSendTime(local)
        return notification
    }

    /// A push each: a delivery left for a worker, which a cancel can still take.
    let route: @Sendable (FanOutJob, RecipientContext, Date) -> [PlannedDelivery] = { _, recipient, _ in
        [PlannedDelivery(sink: "push", userID: recipient.userID, distribution: .alert)]
    }

    /// Microseconds, as stored.
    func stored(_ date: Date) -> Date { Timestamp.date(microseconds: Timestamp.microseconds(date)) }

    /// Pages `notification`'s recipients, giving each the instant `instants` names.
    func page(_ store: any HeraldStorage, _ notification: HeraldNotification, _ instants: [String: Date]) async throws {
        let jobs = try await store.pendingFanOuts(limit: 10)
        #expect(jobs.map(\.notification.id).contains(notification.id), "due at once: the pages are written now")
        #expect(jobs.first { $0.notification.id == notification.id }?.notification.sendAtLocal == notification.sendAtLocal)
        var pages = 0
        while try await store.writeFanOutPage(
            of: notification.id, pageSize: 100,
            route: { _ in
                Issue.record("nobody is routed while paged")
                return []
            },
            localInstant: { instants[$0.userID] ?? .distantFuture })?.done == false
        {
            pages += 1
        }
        #expect(pages == instants.count / 100, "pages of 100")
    }

    @Test(arguments: StoreKind.allCases)
    func eachRecipientIsRoutedAtTheirOwnInstantOnce(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let sent = notification(.users(["ann", "bob", "cy"]))
        let accepted = try await store.acceptScheduled(
            sent, recipients: .users(["ann", "bob", "cy"]), dueAt: nil, idempotency: nil, idempotencySince: Date())
        #expect(accepted.receipt.recipients == 3)
        #expect(try await store.notification(id: sent.id)?.sendAtLocal == LocalSendTime("09:00"))
        let before = try #require(try await store.status(of: sent.id)?.fanOut)
        #expect(before.local && before.scheduledRecipients(at: Date()) == 3, "not paged yet: all three wait")

        let past = stored(Date().addingTimeInterval(-5))
        let later = stored(Date().addingTimeInterval(3600))
        try await page(store, sent, ["ann": past, "bob": past.addingTimeInterval(-1), "cy": later])
        #expect(try await store.status(of: sent.id)?.deliveries.isEmpty == true, "paging routes nobody")
        let paged = try #require(try await store.status(of: sent.id)?.fanOut)
        #expect(paged.waiting == 3 && paged.scheduledRecipients(at: Date()) == 3)
        #expect(try await store.untilNextScheduledFanOut() == .zero, "two are due")

        let seen = RecordedInstants()
        let routed = try await store.writeDueRecipients(limit: 10) { job, recipient, instant in
            seen.add(recipient.userID, instant, job.notification.id)
            return [
                PlannedDelivery(sink: "history", userID: recipient.userID, distribution: .alert),
                PlannedDelivery(sink: "push", userID: recipient.userID, distribution: .alert),
            ]
        }
        #expect(routed == 2)
        #expect(seen.all == ["ann": past, "bob": past.addingTimeInterval(-1)], "each routed at their own instant")
        #expect(seen.notifications == [sent.id])
        let rows = try #require(try await store.status(of: sent.id)).deliveries
        #expect(rows.filter { $0.sink == "push" }.map(\.userID).sorted() == ["ann", "bob"])
        let bobs = rows.filter { $0.userID == "bob" }
        #expect(bobs.count == 2 && bobs.allSatisfy { $0.updatedAt == past.addingTimeInterval(-1) }, "dated with the recipient's instant")
        #expect(bobs.first { $0.sink == "push" }?.state == .pending && bobs.first { $0.sink == "push" }?.nextAttemptAt == past.addingTimeInterval(-1))
        // The history rows are written as the recipients are routed, as an accept writes them:
        // nothing is left for the history sink.
        #expect(rows.filter { $0.sink == "history" }.map(\.state) == [.delivered, .delivered])
        let bobsHistory = try await store.history(userID: "bob", after: 0, limit: 10).map(\.item)
        #expect(bobsHistory.map(\.notificationID) == [sent.id])
        #expect(try await store.history(userID: "cy", after: 0, limit: 10).isEmpty, "cy's instant has not come")
        #expect(try await store.claimDue(now: Date(), limit: 10, lease: .seconds(60)).map(\.sink) == ["push", "push"])
        #expect(try await store.writeDueRecipients(limit: 10, route: route) == 0, "each once")
        let until = try #require(try await store.untilNextScheduledFanOut())
        #expect(until > .seconds(3000) && until <= .seconds(3600), "cy is next")
        #expect(try await store.status(of: sent.id)?.fanOut?.scheduledRecipients(at: Date()) == 1)
        await store.close()
    }

    @Test(arguments: StoreKind.allCases)
    func aCancelTakesThoseStillWaitingAndAnErasureTheirs(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        try await store.setAttributes(UserAttributes(), userID: "dee")
        let audience = Audience(all: true, userIDs: ["ann", "bob"])
        let sent = notification(.audience(audience), local: "2030-01-01T09:00")
        _ = try await store.acceptScheduled(sent, recipients: .audience(audience), dueAt: nil, idempotency: nil, idempotencySince: Date())
        let later = stored(Date().addingTimeInterval(3600))
        try await page(store, sent, ["ann": stored(Date().addingTimeInterval(-1)), "bob": later, "dee": later])
        #expect(try await store.writeDueRecipients(limit: 10, route: route) == 1)

        _ = try await store.eraseUser(userID: "dee", at: Date())
        #expect(try await store.status(of: sent.id)?.fanOut?.waiting == 1, "an erased user's instant goes with them")
        // Retention keeps a notification someone still waits for, however old.
        _ = try await store.purgeFinishedDeliveries(before: Date().addingTimeInterval(86_400), limit: 100)
        #expect(try await store.purgeNotifications(before: Date().addingTimeInterval(86_400), after: nil, limit: 100).deleted == 0)
        #expect(try await store.status(of: sent.id)?.fanOut?.waiting == 1)

        #expect(try await store.cancel(id: sent.id, at: Date()) == Cancellation(deliveries: 1, recipients: 1))
        let cancelled = try #require(try await store.status(of: sent.id)?.fanOut)
        #expect(cancelled.cancelled && cancelled.cancelledRecipients == 1 && cancelled.waiting == 0)
        #expect(try await store.untilNextScheduledFanOut() == nil)
        #expect(try await store.cancel(id: sent.id, at: Date())?.isEmpty == true, "nothing left")
        await store.close()
    }

    /// Processes routing due recipients at once take different ones: every recipient gets one
    /// row, none two.
    @Test(arguments: StoreKind.allCases)
    func concurrentClaimsRouteEachRecipientOnce(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let users = (0..<300).map { "u\($0)" }
        let sent = notification(.users(users))
        _ = try await store.acceptScheduled(sent, recipients: .users(users), dueAt: nil, idempotency: nil, idempotencySince: Date())
        let past = stored(Date().addingTimeInterval(-1))
        try await page(store, sent, Dictionary(uniqueKeysWithValues: users.map { ($0, past) }))
        let route = self.route
        let routed = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    var total = 0
                    while true {
                        let count = try await store.writeDueRecipients(limit: 25, route: route)
                        if count == 0 { return total }
                        total += count
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(routed == 300)
        let summary = try #require(try await store.status(of: sent.id)).summary
        #expect(summary["push"]?[.pending] == 300, "one row each")
        await store.close()
    }
}

extension LocalTimeSendConformanceTests {
    /// A cancel racing the workers that route due recipients: each recipient is either routed
    /// (their rows then cancelled, unless a worker held them) or counted as cancelled, never
    /// both, never lost.
    @Test(arguments: StoreKind.allCases)
    func aCancelRacingTheClaimsLosesAndDoublesNobody(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let users = (0..<400).map { "r\($0)" }
        let sent = notification(.users(users))
        _ = try await store.acceptScheduled(sent, recipients: .users(users), dueAt: nil, idempotency: nil, idempotencySince: Date())
        let past = stored(Date().addingTimeInterval(-1))
        try await page(store, sent, Dictionary(uniqueKeysWithValues: users.map { ($0, past) }))
        let route = self.route
        let (routed, cancellation) = try await withThrowingTaskGroup(of: (Int, Cancellation?).self) { group in
            for _ in 0..<2 {
                group.addTask {
                    var total = 0
                    while true {
                        let count = try await store.writeDueRecipients(limit: 20, route: route)
                        if count == 0 { return (total, nil) }
                        total += count
                    }
                }
            }
            group.addTask {
                try await Task.sleep(for: .milliseconds(5))
                return (0, try await store.cancel(id: sent.id, at: Date()))
            }
            var routed = 0
            var cancellation: Cancellation?
            for try await (count, cancelled) in group {
                routed += count
                if let cancelled { cancellation = cancelled }
            }
            return (routed, cancellation)
        }
        let cancelled = try #require(cancellation)
        #expect(routed + cancelled.recipients == 400, "routed \(routed), cancelled before routing \(cancelled.recipients)")
        let summary = try #require(try await store.status(of: sent.id)).summary["push"] ?? [:]
        #expect(summary.values.reduce(0, +) == routed, "one row per routed recipient")
        // A recipient routed before the cancel took its turn has rows waiting for an attempt
        // (nothing delivers here): the cancel takes them too.
        #expect(summary[.cancelled, default: 0] == routed && cancelled.deliveries == routed)
        #expect(try await store.status(of: sent.id)?.fanOut?.cancelledRecipients == cancelled.recipients)
        await store.close()
    }
}

/// What a route closure saw, from concurrent calls.
private final class RecordedInstants: @unchecked Sendable {
    private let lock = NSLock()
    private var instants: [String: Date] = [:]
    private var ids: Set<ObjectID> = []

    func add(_ user: String, _ instant: Date, _ id: ObjectID) {
        lock.withLock {
            instants[user] = instant
            ids.insert(id)
        }
    }

    var all: [String: Date] { lock.withLock { instants } }
    var notifications: Set<ObjectID> { lock.withLock { ids } }
}
