import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

/// Scheduled sends on every engine (docs/timing.md): the accept stores the notification and a
/// job due at its instant; nothing is pending before it; from it the job's pages are written
/// with the instant as their time.
@Suite(.cleansUp) struct ScheduledSendConformanceTests {
    let ids = ObjectIDGenerator()

    func notification(_ target: NotificationTarget, key: String? = nil) -> HeraldNotification {
        HeraldNotification(id: ids.next(), type: "generic", title: "T", body: "B", url: nil, timestamp: Date(), idempotencyKey: key, target: target)
    }

    let route: @Sendable (RecipientContext) -> [PlannedDelivery] = { recipient in
        [PlannedDelivery(sink: "history", userID: recipient.userID, distribution: .alert)]
    }

    /// Microseconds, as stored.
    func stored(_ date: Date) -> Date { Timestamp.date(microseconds: Timestamp.microseconds(date)) }

    @Test(arguments: StoreKind.allCases)
    func nothingIsWrittenBeforeTheInstantAndEverythingFromIt(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let later = notification(.users(["ann", "bob", "ann"]))
        let dueLater = stored(Date().addingTimeInterval(3600))
        let accepted = try await store.acceptScheduled(
            later, recipients: .users(["ann", "bob", "ann"]), dueAt: dueLater, idempotency: nil, idempotencySince: Date())
        #expect(accepted.receipt.recipients == 2, "each user named once")
        #expect(try await store.pendingFanOuts(limit: 10).isEmpty, "not due")
        let until = try #require(try await store.untilNextScheduledFanOut())
        #expect(until > .seconds(3000) && until <= .seconds(3600))
        #expect(try await store.status(of: later.id)?.fanOut == FanOutProgress(recipients: 2, written: 0, done: false, dueAt: dueLater))
        #expect(try await store.status(of: later.id)?.deliveries.isEmpty == true)

        // One due already (its instant has just passed).
        let due = notification(.users(["cy"]))
        let dueNow = stored(Date().addingTimeInterval(-1))
        _ = try await store.acceptScheduled(due, recipients: .users(["cy"]), dueAt: dueNow, idempotency: nil, idempotencySince: Date())
        #expect(try await store.untilNextScheduledFanOut() == .zero)
        let pending = try await store.pendingFanOuts(limit: 10)
        #expect(pending.map(\.notification.id) == [due.id])
        #expect(pending.first?.routedAt == dueNow, "routed at its instant")
        let routeWithPush: @Sendable (RecipientContext) -> [PlannedDelivery] = { recipient in
            [
                PlannedDelivery(sink: "history", userID: recipient.userID, distribution: .alert),
                PlannedDelivery(sink: "push", userID: recipient.userID, distribution: .alert),
            ]
        }
        #expect(try await store.writeFanOutPage(of: due.id, pageSize: 10, route: routeWithPush)?.done == true)
        let rows = try #require(try await store.status(of: due.id)).deliveries
        #expect(rows.map(\.userID) == ["cy", "cy"])
        #expect(rows.allSatisfy { $0.updatedAt == dueNow }, "the rows carry the instant")
        let push = try #require(rows.first { $0.sink == "push" })
        #expect(push.state == .pending && push.nextAttemptAt == dueNow)
        // The page writes the history row, as an accept for users does: nothing is left for the
        // history sink.
        #expect(rows.first { $0.sink == "history" }?.state == .delivered)
        #expect(try await store.history(userID: "cy", after: 0, limit: 10).map(\.item.notificationID) == [due.id])
        #expect(try await store.claimDue(now: Date(), limit: 10, lease: .seconds(60)).map(\.sink) == ["push"])
        #expect(try await store.pendingFanOuts(limit: 10).isEmpty)
        #expect(try #require(try await store.untilNextScheduledFanOut()) > .seconds(3000), "the later one is next")
        await store.close()
    }

    @Test(arguments: StoreKind.allCases)
    func topicsAndAudiencesArePagedAtTheInstantAndKeysReplay(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let tree = try await TopicTree.make(in: store, ids: ids)
        for user in ["u1", "u2"] { try await store.subscribe(userID: user, topicKey: tree.optIn.topicKey, at: Date()) }
        let past = stored(Date().addingTimeInterval(-1))
        let topic = notification(.topic(tree.optIn.topicKey))
        #expect(
            try await store.acceptScheduled(
                topic, recipients: .topic(tree.optIn.topicKey, level: .optIn), dueAt: past, idempotency: nil, idempotencySince: Date()
            ).receipt.recipients == 2)
        // A subscriber who joins before the instant is one of its recipients.
        try await store.subscribe(userID: "u3", topicKey: tree.optIn.topicKey, at: Date())
        _ = try await store.writeFanOutPage(of: topic.id, pageSize: 10, route: route)
        #expect(try await store.status(of: topic.id)?.deliveries.map(\.userID).sorted() == ["u1", "u2", "u3"])

        let claim = IdempotencyClaim(scope: "k", key: "weekly", requestHash: "h")
        let first = notification(.audience(Audience(userIDs: ["x"])), key: "weekly")
        let answer = try await store.acceptScheduled(
            first, recipients: .audience(Audience(userIDs: ["x"])), dueAt: past, idempotency: claim, idempotencySince: Date().addingTimeInterval(-60))
        let again = try await store.acceptScheduled(
            notification(.audience(Audience(userIDs: ["x"])), key: "weekly"), recipients: .audience(Audience(userIDs: ["x"])), dueAt: past, idempotency: claim,
            idempotencySince: Date().addingTimeInterval(-60))
        #expect(again == .replayed(answer.receipt), "the same key and request answer the first receipt, nothing stored")
        #expect(try await store.pendingFanOuts(limit: 10).map(\.notification.id) == [first.id])
        await store.close()
    }

    /// A cancel stops a scheduled job before its instant and cancels deliveries waiting for an
    /// attempt, never one a worker holds; a second cancel finds nothing left.
    @Test(arguments: StoreKind.allCases)
    func aCancelStopsWhatHasNotGoneOut(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let later = notification(.users(["ann", "bob"]))
        _ = try await store.acceptScheduled(
            later, recipients: .users(["ann", "bob"]), dueAt: Date().addingTimeInterval(3600), idempotency: nil, idempotencySince: Date())
        #expect(try await store.cancel(id: later.id, at: Date()) == Cancellation(deliveries: 0, recipients: 2))
        #expect(try await store.status(of: later.id)?.fanOut?.cancelled == true)
        #expect(try await store.untilNextScheduledFanOut() == nil, "nothing scheduled any more")
        #expect(try await store.cancel(id: later.id, at: Date())?.isEmpty == true)
        #expect(try await store.writeFanOutPage(of: later.id, pageSize: 10, route: route)?.written == 0, "a cancelled job writes nothing")

        // Sent at once: three pushes waiting, one of which a worker holds.
        let now = notification(.users(["cy"]))
        _ = try await store.accept(
            now, recipients: 1,
            deliveries: (1...3).map { _ in PlannedDelivery(sink: "push", userID: "cy", distribution: .alert) }, idempotencySince: Date())
        let held = try await store.claimDue(now: Date().addingTimeInterval(1), limit: 1, lease: .seconds(60))
        #expect(held.count == 1)
        #expect(try await store.cancel(id: now.id, at: Date()) == Cancellation(deliveries: 2, recipients: 0))
        let states = try #require(try await store.status(of: now.id)).deliveries.map(\.state)
        #expect(states.sorted { $0.rawValue < $1.rawValue } == [.cancelled, .cancelled, .pending], "the held one goes out")
        #expect(
            try await store.claimDue(now: Date().addingTimeInterval(120), limit: 10, lease: .seconds(60)).map(\.id) == held.map(\.id),
            "only the held one, after its lease")
        #expect(try await store.cancel(id: ids.next(), at: Date()) == nil, "unknown")
        await store.close()
    }

    /// A notification stored with its deliveries and a `send_at` (a scheduled broadcast): the
    /// instant is kept with it, and its deliveries are due then, not before.
    @Test(arguments: StoreKind.allCases)
    func deliveriesStoredAheadAreDueAtTheInstant(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        var broadcast = notification(.broadcast(BroadcastOptions()))
        let instant = stored(Date().addingTimeInterval(3600))
        broadcast.sendAt = instant
        _ = try await store.accept(
            broadcast, recipients: 0, deliveries: [PlannedDelivery(sink: "feed", userID: "", distribution: .alert)], idempotencySince: Date())
        #expect(try await store.notification(id: broadcast.id)?.sendAt == instant)
        #expect(try await store.status(of: broadcast.id)?.notification.sendAt == instant)
        #expect(try await store.claimDue(now: Date(), limit: 10, lease: .seconds(60)).isEmpty, "not before its instant")
        let claimed = try await store.claimDue(now: instant.addingTimeInterval(1), limit: 10, lease: .seconds(60))
        #expect(claimed.map(\.notification.id) == [broadcast.id])
        #expect(claimed.first?.notification.sendAt == instant, "the sink sees the instant (a broadcast's posted_at)")
        await store.close()
    }

    /// Many sends scheduled later do not hide the one due now, nor do fan-outs written at once
    /// hold back the due ones: each kind is listed up to the limit.
    @Test(arguments: StoreKind.allCases)
    func dueSendsAreListedBesideFanOutsWrittenAtOnceAndLaterSends(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        _ = try await store.updateSettings(userID: "known") { _ in }
        for _ in 0..<20 {
            _ = try await store.acceptScheduled(
                notification(.users(["later"])), recipients: .users(["later"]), dueAt: Date().addingTimeInterval(86_400), idempotency: nil,
                idempotencySince: Date())
        }
        var immediate: [ObjectID] = []
        for _ in 0..<3 {
            let n = notification(.audience(Audience(all: true)))
            _ = try await store.acceptAudience(
                n, audience: Audience(all: true), route: route, pageSize: 10, inlineLimit: 0, idempotency: nil, idempotencySince: Date())
            immediate.append(n.id)
        }
        let due = notification(.users(["now"]))
        _ = try await store.acceptScheduled(due, recipients: .users(["now"]), dueAt: Date().addingTimeInterval(-1), idempotency: nil, idempotencySince: Date())
        let listed = try await store.pendingFanOuts(limit: 2).map(\.notification.id)
        #expect(listed == Array(immediate.prefix(2)) + [due.id], "two written at once, oldest first, and the due one")
        await store.close()
    }

    /// Pages of several jobs in one call (one transaction): each job advances as if written
    /// alone, the answers in the order asked, nil for an id without a job.
    @Test(arguments: StoreKind.allCases)
    func pagesOfSeveralJobsAreWrittenTogether(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let past = Date().addingTimeInterval(-1)
        let one = notification(.users(["ann"]))
        let two = notification(.users(["bob", "cy", "dee"]))
        for (n, users) in [(one, ["ann"]), (two, ["bob", "cy", "dee"])] {
            _ = try await store.acceptScheduled(n, recipients: .users(users), dueAt: past, idempotency: nil, idempotencySince: Date())
        }
        let progress = try await store.writeFanOutPages(
            [FanOutPage(of: one.id, route: route), FanOutPage(of: ids.next(), route: route), FanOutPage(of: two.id, route: route)], pageSize: 2)
        #expect(progress.map { $0?.written } == [1, nil, 2])
        #expect(progress.map { $0?.done } == [true, nil, false])
        #expect(try #require(try await store.status(of: one.id)).deliveries.map(\.userID) == ["ann"])
        #expect(try #require(try await store.status(of: two.id)).deliveries.map(\.userID).sorted() == ["bob", "cy"])
        #expect(try await store.pendingFanOuts(limit: 10).map(\.notification.id) == [two.id], "the first is done, the second has a page left")
        #expect(try await store.writeFanOutPages([], pageSize: 2).isEmpty)
        await store.close()
    }
}
