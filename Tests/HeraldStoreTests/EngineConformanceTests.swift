import Foundation
import HeraldCore
import HeraldFeed
import HeraldTestSupport
import Synchronization
import Testing

@testable import HeraldStore

/// The pull feed, queue statistics and the work notifications, on every engine.
@Suite(.cleansUp) struct EngineConformanceTests {
    let ids = ObjectIDGenerator()
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    @Test(arguments: StoreKind.allCases)
    func feedMessagesAddOnceDeleteAndPurge(_ kind: StoreKind) async throws {
        let database = try await kind.make()
        let store = SharedFeedStore(database: database)
        // Every change is announced, to this process's watchers too.
        let heard = Mutex(0)
        let watching = Task { try await store.watchFeedChanges { heard.withLock { $0 += 1 } } }
        defer { watching.cancel() }
        try await Task.sleep(for: .milliseconds(200))
        let live = FeedMessage(
            id: ids.next(at: t0), title: "Live", body: "b", url: nil, postedAt: t0, expiresAt: t0.addingTimeInterval(3600), priority: 2,
            targetRegions: ["QC", "ON"], targetVersion: ">=2.1.0 <3"
        )
        let stale = FeedMessage(
            id: ids.next(at: t0), title: "Stale", body: "b", url: "https://x.example", postedAt: t0, expiresAt: t0.addingTimeInterval(60), priority: 0,
            targetRegions: ["CA"], targetVersion: nil
        )
        try await store.addFeedMessage(live)
        try await store.addFeedMessage(live)
        try await store.addFeedMessage(stale)
        #expect(try await store.feedMessages() == [live, stale], "adding the same id twice stores it once")
        #expect(try await store.purgeFeedMessages(expiredBefore: t0.addingTimeInterval(120)) == 1)
        #expect(try await store.feedMessages() == [live])
        #expect(try await store.deleteFeedMessage(id: live.id))
        #expect(try await store.deleteFeedMessage(id: live.id) == false)
        #expect(try await store.feedMessages().isEmpty)
        // Three adds, a purge, a delete; the delete that removed nothing tells no one.
        let deadline = ContinuousClock.now + .seconds(10)
        while heard.withLock({ $0 }) < 5, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(heard.withLock { $0 } == 5)
        await database.close()
    }

    @Test(arguments: StoreKind.allCases)
    func queueStatsCountPendingAndTheOldest(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        #expect(try await store.queueStats() == QueueStats(pending: 0, oldestPendingSince: nil))
        #expect(try await store.oldestPendingBySink().isEmpty)
        // Four sinks, their deliveries interleaved in time, so each sink's oldest is found
        // among the others' (QueueStatsSQL steps from sink to sink through one index).
        let plan: [(offset: Double, users: [String], sink: String)] = [
            (0, ["a", "b"], "history"), (10, ["c"], "webhook"), (20, ["d"], "apns"), (30, ["e"], "hook"), (40, ["f"], "history"), (50, ["g"], "hook"),
        ]
        for (offset, users, sink) in plan {
            let at = t0.addingTimeInterval(offset)
            let n = HeraldNotification(id: ids.next(at: at), type: "comment", title: "T", body: "B", url: nil, timestamp: at, target: .users(users))
            _ = try await store.accept(
                n, recipients: users.count, deliveries: users.map { PlannedDelivery(sink: sink, userID: $0, distribution: .alert) }, idempotencySince: t0)
        }
        #expect(try await store.queueStats() == QueueStats(pending: 7, oldestPendingSince: t0))
        #expect(
            try await store.oldestPendingBySink() == [
                "apns": t0.addingTimeInterval(20), "history": t0, "hook": t0.addingTimeInterval(30), "webhook": t0.addingTimeInterval(10),
            ], "each sink's oldest waiting delivery")
        // The five first due are claimed: history's two, webhook's, apns' and the first hook's. The
        // history's are delivered, webhook's fails for good, apns' is retried later and the
        // hook's lease is left to run out: a retry and a leased delivery still wait.
        let claimed = try await store.claimDue(now: t0.addingTimeInterval(60), limit: 5, lease: .seconds(30))
        #expect(claimed.map(\.sink).sorted() == ["apns", "history", "history", "hook", "webhook"])
        let outcome: [String: DeliveryState] = ["history": .delivered, "webhook": .failed, "apns": .pending]
        try await store.record(
            claimed.compactMap { delivery in
                outcome[delivery.sink].map { DeliveryUpdate(id: delivery.id, state: $0, attempts: 1, nextAttemptAt: t0.addingTimeInterval(600)) }
            }, at: t0.addingTimeInterval(60))
        #expect(try await store.queueStats() == QueueStats(pending: 4, oldestPendingSince: t0.addingTimeInterval(20)), "finished ones leave the queue")
        #expect(
            try await store.oldestPendingBySink() == [
                "apns": t0.addingTimeInterval(20), "history": t0.addingTimeInterval(40), "hook": t0.addingTimeInterval(30),
            ], "a sink with nothing left waiting is not listed; a retry and a lease still wait")
        await store.close()
    }

    /// Two stores on one fresh PostgreSQL database, the first migrated: two processes' views.
    /// Nil for SQLite, whose `watchForWork`, checked here, returns at once: one process writes
    /// the file, and wakes its workers and withdraws its copies itself.
    static func twoProcesses(_ kind: StoreKind) async throws -> (PostgresStore, PostgresStore)? {
        guard kind == .postgres else {
            let store = try await kind.make()
            try await store.watchForWork { _ in }
            await store.close()
            return nil
        }
        let url = try await PostgresTestDatabase.create()
        let first = try PostgresStore.patient(url: url)
        try await first.migrate()
        return (first, try PostgresStore.patient(url: url))
    }

    /// Another process's commit wakes this one's workers on PostgreSQL; SQLite, written by one
    /// process, returns at once (that process wakes its own workers).
    @Test(arguments: StoreKind.allCases)
    func workNotificationsReachOtherProcesses(_ kind: StoreKind) async throws {
        guard let (watcher, writer) = try await Self.twoProcesses(kind) else { return }
        let wakes = Mutex(0)
        let watching = Task { try await watcher.watchForWork { notice in if notice == .work { wakes.withLock { $0 += 1 } } } }
        // LISTEN connects in the background: commit until a wake arrives, with a deadline.
        let deadline = ContinuousClock.now + .seconds(10)
        while wakes.withLock({ $0 }) == 0 && ContinuousClock.now < deadline {
            let n = HeraldNotification(id: ids.next(), type: "comment", title: "T", body: "B", url: nil, timestamp: Date(), target: .users(["u"]))
            _ = try await writer.accept(
                n, recipients: 1, deliveries: [PlannedDelivery(sink: "history", userID: "u", distribution: .alert)], idempotencySince: t0)
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(wakes.withLock { $0 } > 0, "a commit in another process wakes the watcher")
        watching.cancel()
        _ = await watching.result
        await writer.close()
        await watcher.close()
    }

    /// The work channel carries both notices; a payload this version cannot read is new work.
    @Test func workChannelPayloads() {
        #expect(WithdrawalMessage.notice("") == .work)
        #expect(WithdrawalMessage.notice("w7,42") == .withdrawn([7, 42]))
        #expect(WithdrawalMessage.notice("w7,x,9") == .withdrawn([7, 9]))
        #expect(WithdrawalMessage.notice("v2:something") == .work)
    }

    /// A push an accept handed to its own process's workers is sent without reading its row
    /// again, so when another process fails the row (a device it removes or sees registered by
    /// another user, a user it erases), PostgreSQL tells every process the leased ids; pending
    /// rows no process holds are not announced. SQLite, written by one process, returns at once.
    @Test(arguments: StoreKind.allCases)
    func withdrawalsReachOtherProcesses(_ kind: StoreKind) async throws {
        guard let (holder, other) = try await Self.twoProcesses(kind) else { return }
        let heard = Mutex(Set<Int64>())
        let watching = Task {
            try await holder.watchForWork { notice in
                if case .withdrawn(let ids) = notice { heard.withLock { $0.formUnion(ids) } }
            }
        }

        /// Queues a push to each of `tokens`, registered for `user`, and leases them as an
        /// accept's hand-off would (unless `leased` is false). - Returns: the leased ids.
        func push(_ user: String, _ tokens: [String], leased: Bool = true) async throws -> Set<Int64> {
            var planned: [PlannedDelivery] = []
            for token in tokens {
                let device = try await holder.registerDevice(userID: user, registration: .token(token, provider: "fcm"), newID: ids.next(), at: t0)
                planned.append(PlannedDelivery(sink: "fcm", userID: user, deviceID: device.id, distribution: .alert))
            }
            let n = HeraldNotification(id: ids.next(), type: "comment", title: "T", body: "B", url: nil, timestamp: Date(), target: .users([user]))
            _ = try await holder.accept(n, recipients: 1, deliveries: planned, idempotencySince: t0)
            guard leased else { return [] }
            let claimed = try await holder.claimDue(now: Date(), limit: 1_000, lease: .seconds(300))
            #expect(claimed.count == tokens.count)
            return Set(claimed.map(\.id))
        }

        // LISTEN connects in the background: remove a probe device until its notice arrives.
        let deadline = ContinuousClock.now + .seconds(10)
        var probes = 0
        // A probe's notice may land after the watcher is found listening (the loop had sent the
        // next probe by then): probes are left out of what is compared below.
        var probeIDs: Set<Int64> = []
        while heard.withLock({ $0.isEmpty }) && ContinuousClock.now < deadline {
            probes += 1
            probeIDs.formUnion(try await push("probe", ["probe-\(probes)"]))
            _ = try await other.unregisterDevice(userID: "probe", provider: "fcm", addressKey: "probe-\(probes)", at: t0)
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(!heard.withLock { $0.isEmpty }, "the watcher hears another process's removal")
        heard.withLock { $0.removeAll() }

        let moved = try await push("alice", ["tok-moved"])
        let removed = try await push("carol", ["tok-removed"])
        // More leased rows than one payload holds, and a pending one nobody holds.
        let erased = try await push("erin", (0...WithdrawalMessage.idsPerPayload).map { "tok-erin-\($0)" })
        let kept = try await push("dave", ["tok-dave"])
        _ = try await push("erin", ["tok-erin-pending"], leased: false)

        _ = try await other.registerDevice(userID: "bob", registration: .token("tok-moved", provider: "fcm"), newID: ids.next(), at: t0)
        #expect(try await other.unregisterDevice(userID: "carol", provider: "fcm", addressKey: "tok-removed", at: t0))
        _ = try await other.eraseUser(userID: "erin", at: t0)

        let expected = moved.union(removed).union(erased)
        let until = ContinuousClock.now + .seconds(10)
        while heard.withLock({ $0.subtracting(probeIDs) != expected }) && ContinuousClock.now < until { try await Task.sleep(for: .milliseconds(20)) }
        #expect(heard.withLock { $0.subtracting(probeIDs) } == expected, "the moved, removed and erased pushes, \(expected.count) in all; not dave's")
        #expect(heard.withLock { $0.isDisjoint(with: kept) })
        watching.cancel()
        _ = await watching.result
        await other.close()
        await holder.close()
    }
}

@Suite(.cleansUp) struct KeyConformanceTests {
    @Test(arguments: StoreKind.allCases)
    func ensureKeyKeepsWhatIsThereRevokedOrNot(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let ids = ObjectIDGenerator()
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        let first = APIKeyRecord(id: ids.next(), name: "bootstrap-admin", role: .admin, createdAt: t0)
        #expect(try await store.ensureKey(first, secretHash: "h1") == first)
        let again = APIKeyRecord(id: ids.next(), name: "bootstrap-admin", role: .admin, createdAt: t0)
        #expect(try await store.ensureKey(again, secretHash: "h1") == first, "the key that was there is kept")
        #expect(try await store.revokeKey(id: first.id, at: t0))
        let revoked = try await store.ensureKey(again, secretHash: "h1")
        #expect(revoked.id == first.id && revoked.revokedAt == t0, "a revoked key is reported, never re-enabled")
        #expect(try await store.key(secretHash: "h1") == nil)
        #expect(try await store.keys().count == 1)
        await store.close()
    }
}

/// Device limits, stale devices and retention purges, on every engine.
@Suite(.cleansUp) struct RetentionConformanceTests {
    let ids = ObjectIDGenerator()
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    @Test(arguments: StoreKind.allCases)
    func trimKeepsTheMostRecentlyRegisteredAndPruneTheStale(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        for index in 0..<5 {
            _ = try await store.registerDevice(
                userID: "u", registration: .token("t\(index)", provider: "fcm"), newID: ids.next(), at: t0.addingTimeInterval(Double(index)))
        }
        // Registering t0 again makes it the most recent; the limit then takes the two least
        // recently registered, in the same call.
        let again = try await store.registerDevice(
            userID: "u", registration: .token("t0", provider: "fcm"), newID: ids.next(), at: t0.addingTimeInterval(10), keepingAtMost: 3)
        #expect(again.device.token == "t0")
        #expect(Set(again.evicted.compactMap(\.token)) == ["t1", "t2"])
        #expect(Set(try await store.devices(userID: "u").compactMap(\.token)) == ["t0", "t3", "t4"])
        let within = try await store.registerDevice(
            userID: "u", registration: .token("t3", provider: "fcm"), newID: ids.next(), at: t0.addingTimeInterval(3), keepingAtMost: 3)
        #expect(within.evicted.isEmpty && within.device.token == "t3")
        // A new device past the limit evicts the least recently registered, never itself.
        let fresh = try await store.registerDevice(
            userID: "u", registration: .token("t5", provider: "fcm"), newID: ids.next(), at: t0.addingTimeInterval(12), keepingAtMost: 3)
        #expect(fresh.evicted.compactMap(\.token) == ["t3"])
        #expect(Set(try await store.devices(userID: "u").compactMap(\.token)) == ["t0", "t4", "t5"])
        // Stale: not registered again since t0+4.5 → t4 goes.
        #expect(try await store.pruneDevices(registeredBefore: t0.addingTimeInterval(4.5), limit: 10, at: t0.addingTimeInterval(20)) == 1)
        #expect(Set(try await store.devices(userID: "u").compactMap(\.token)) == ["t0", "t5"])
        await store.close()
    }

    /// The notifications' purge steps on from where the last step stopped, so the ones still
    /// referred to are read once a sweep, not at every batch; newer ones are never read.
    @Test(arguments: StoreKind.allCases)
    func notificationPurgeStepsThroughWhatIsStillReferredTo(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        // Six old notifications, the 2nd, 3rd and 5th still in a user's history; one newer.
        var old: [ObjectID] = []
        for index in 0..<6 {
            let at = t0.addingTimeInterval(Double(index))
            let notification = HeraldNotification(
                id: ids.next(at: at), type: "comment", title: "T", body: "B", url: nil, timestamp: at, target: .users(["a"]))
            _ = try await store.accept(notification, recipients: 1, deliveries: [], idempotencySince: at)
            if [1, 2, 4].contains(index) { try await store.appendHistory([(notification.id, "a")], at: at) }
            old.append(notification.id)
        }
        let cutoff = t0.addingTimeInterval(3600)
        let newer = HeraldNotification(
            id: ids.next(at: cutoff), type: "comment", title: "T", body: "B", url: nil, timestamp: cutoff, target: .users(["a"]))
        _ = try await store.accept(newer, recipients: 1, deliveries: [], idempotencySince: cutoff)

        var steps: [NotificationPurgeStep] = []
        var after: String?
        repeat {
            let step = try await store.purgeNotifications(before: cutoff, after: after, limit: 2)
            steps.append(step)
            after = step.last
        } while after != nil && steps.count < 10
        #expect(
            steps == [
                NotificationPurgeStep(deleted: 1, last: old[1].hex), NotificationPurgeStep(deleted: 1, last: old[3].hex),
                NotificationPurgeStep(deleted: 1, last: old[5].hex), NotificationPurgeStep(deleted: 0, last: nil),
            ], "two looked at a step, the referred-to kept, the sweep ended past the last old one")
        for (index, id) in old.enumerated() {
            #expect((try await store.status(of: id) != nil) == [1, 2, 4].contains(index), "notification \(index)")
        }
        #expect(try await store.status(of: newer.id) != nil, "the newer one is not past the cutoff")
        // A step that starts past the last one reaches the end at once.
        #expect(try await store.purgeNotifications(before: cutoff, after: old[5].hex, limit: 2) == NotificationPurgeStep(deleted: 0, last: nil))
        await store.close()
    }

    @Test(arguments: StoreKind.allCases)
    func purgesRemoveOnlyWhatIsOldEnoughAndFinished(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let old = HeraldNotification(
            id: ids.next(at: t0), type: "comment", title: "T", body: "B", url: nil, timestamp: t0, idempotencyKey: "k-old", target: .users(["a", "b"]))
        _ = try await store.accept(
            old, recipients: 2,
            deliveries: [PlannedDelivery(sink: "history", userID: "a", distribution: .alert), PlannedDelivery(sink: "fcm", userID: "b", distribution: .alert)],
            idempotencySince: t0)
        let claimed = try await store.claimDue(now: t0, limit: 10, lease: .seconds(30))
        // History delivered (and its row written); the push stays pending.
        let history = try #require(claimed.first { $0.sink == "history" })
        try await store.appendHistory([(old.id, "a")], at: t0)
        try await store.record([DeliveryUpdate(id: history.id, state: .delivered, attempts: 1)], at: t0)
        let later = t0.addingTimeInterval(8 * 86_400)
        #expect(try await store.purgeFinishedDeliveries(before: later, limit: 100) == 1, "the pending push is kept")
        #expect(try await store.status(of: old.id)?.deliveries.map(\.sink) == ["fcm"])
        #expect(try await store.purgeIdempotencyKeys(before: later, limit: 100) == 1)
        #expect(try await store.receipt(for: IdempotencyClaim(scope: "", key: "k-old", requestHash: ""), since: .distantPast) == nil)
        #expect(try await store.purgeNotifications(before: later, after: nil, limit: 100).deleted == 0, "a delivery and a history row still refer to it")
        #expect(try await store.purgeHistory(before: t0, limit: 100) == 0)
        #expect(try await store.purgeHistory(before: later, limit: 100) == 1)
        #expect(try await store.history(userID: "a", limit: 10, before: nil).items.isEmpty)
        let claimedAgain = try await store.claimDue(now: later, limit: 10, lease: .seconds(30))
        try await store.record(claimedAgain.map { DeliveryUpdate(id: $0.id, state: .failed, attempts: 2, lastError: "x") }, at: later)
        #expect(try await store.purgeFinishedDeliveries(before: later.addingTimeInterval(1), limit: 100) == 1)
        #expect(try await store.purgeNotifications(before: later, after: nil, limit: 100).deleted == 1, "nothing refers to it any more")
        #expect(try await store.status(of: old.id) == nil)
        // The archive, by the message's own (millisecond) timestamp.
        let message = HeraldNotification(id: ids.next(at: t0), type: "message", title: "M", body: "d", url: nil, timestamp: t0, target: .topic("c-a-s"))
        let archive = ArchivedMessage(
            msiKey: message.id.hex, topicKey: "c-a-s", title: "M", desc: "d", message: "m", distribution: .alert,
            timestamp: Int64(t0.timeIntervalSince1970 * 1000), sender: "Super User"
        )
        _ = try await store.acceptFanOut(
            message, topic: "c-a-s", level: .optIn, plan: .historyOnly, extra: [], archive: archive, pageSize: 100, idempotencySince: t0)
        #expect(try await store.purgeArchive(before: t0, limit: 100) == 0)
        #expect(try await store.purgeArchive(before: later, limit: 100) == 1)
        #expect(try await store.messages(topicKey: nil, limit: 10, before: nil).messages.isEmpty)
        await store.close()
    }
}

/// Leases are fenced by the attempt: a worker whose lease was taken over cannot overwrite the
/// newer outcome, and a heartbeat keeps a slow batch's leases.
@Suite(.cleansUp) struct LeaseFencingConformanceTests {
    let ids = ObjectIDGenerator()
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    @Test(arguments: StoreKind.allCases)
    func aStaleOutcomeChangesNothing(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let device = try await store.registerDevice(userID: "u", registration: .token("t", provider: "fcm"), newID: ids.next(), at: t0)
        let n = HeraldNotification(id: ids.next(at: t0), type: "comment", title: "T", body: "B", url: nil, timestamp: t0, target: .users(["u"]))
        _ = try await store.accept(
            n, recipients: 1, deliveries: [PlannedDelivery(sink: "fcm", userID: "u", deviceID: device.id, distribution: .alert)], idempotencySince: t0)
        let slow = try #require(try await store.claimDue(now: t0, limit: 1, lease: .seconds(1)).first)
        // The lease runs out; another worker claims it again.
        let fresh = try #require(try await store.claimDue(now: t0.addingTimeInterval(2), limit: 1, lease: .seconds(60)).first)
        #expect(slow.id == fresh.id && slow.attempt == 1 && fresh.attempt == 2)
        // The slow worker answers late: gone (would remove the device) — fenced off.
        try await store.record(
            [DeliveryUpdate(id: slow.id, state: .failed, attempts: slow.attempt, lastError: "late", removeDevice: device.id)], at: t0.addingTimeInterval(3))
        var status = try #require(try await store.status(of: n.id))
        #expect(status.deliveries.first?.state == .pending && status.deliveries.first?.attempts == 2)
        #expect(try await store.devices(userID: "u").count == 1, "a stale outcome removes no device")
        try await store.record([DeliveryUpdate(id: fresh.id, state: .delivered, attempts: fresh.attempt)], at: t0.addingTimeInterval(4))
        status = try #require(try await store.status(of: n.id))
        #expect(status.deliveries.first?.state == .delivered && status.deliveries.first?.attempts == 2)
        // Recording again, or late, changes nothing either.
        try await store.record([DeliveryUpdate(id: fresh.id, state: .failed, attempts: fresh.attempt, lastError: "again")], at: t0.addingTimeInterval(5))
        #expect(try await store.status(of: n.id)?.deliveries.first?.state == .delivered)
        await store.close()
    }

    @Test(arguments: StoreKind.allCases)
    func aHeartbeatKeepsTheLeaseUntilTheOutcomeIsRecorded(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let n = HeraldNotification(id: ids.next(at: t0), type: "comment", title: "T", body: "B", url: nil, timestamp: t0, target: .users(["u"]))
        _ = try await store.accept(n, recipients: 1, deliveries: [PlannedDelivery(sink: "history", userID: "u", distribution: .alert)], idempotencySince: t0)
        let claimed = try #require(try await store.claimDue(now: t0, limit: 1, lease: .seconds(1)).first)
        let lease = DeliveryLease(id: claimed.id, attempt: claimed.attempt)
        try await store.extendLeases([lease], until: t0.addingTimeInterval(10))
        #expect(try await store.claimDue(now: t0.addingTimeInterval(5), limit: 1, lease: .seconds(1)).isEmpty, "the extended lease holds")
        // A retry recorded: the heartbeat must not move its next attempt.
        try await store.record(
            [DeliveryUpdate(id: claimed.id, state: .pending, attempts: claimed.attempt, lastError: "503", nextAttemptAt: t0.addingTimeInterval(6))],
            at: t0.addingTimeInterval(5))
        try await store.extendLeases([lease], until: t0.addingTimeInterval(100))
        #expect(try await store.nextDueDate() == t0.addingTimeInterval(6))
        await store.close()
    }
}

/// The group-commit queue is bounded: a flood is refused at once (503), never queued forever.
@Suite(.cleansUp) struct GroupCommitBoundTests {
    /// Each step waits for the state it needs, not for a while: with sleeps, a loaded machine
    /// started the first request late, the first two shared a commit, the third was queued
    /// behind the gate that opens only after it returns, and the test never ended.
    @Test func aFullQueueRefusesAtOnce() async throws {
        let gate = AsyncStream<Void>.makeStream()
        let committing = Mutex<[[Int]]>([])
        let commit = GroupCommit<Int, Int>(maxBatch: 10, maxWaiting: 1) { requests in
            committing.withLock { $0.append(requests) }
            for await _ in gate.stream { break }
            return requests
        }
        let first = Task { try await commit.submit(1) }
        #expect(try await Self.eventually { committing.withLock { $0 } == [[1]] }, "the first is committing, held at the gate")
        let second = Task { try await commit.submit(2) }
        #expect(try await Self.eventually { commit.waitingCount == 1 }, "the second waits: the queue's one place")
        let thirdAnswered = Mutex(false)
        let third = Task {
            defer { thirdAnswered.withLock { $0 = true } }
            return try await commit.submit(3)
        }
        let answeredAtOnce = try await Self.eventually { thirdAnswered.withLock { $0 } }
        // Opened whatever happened, so a third that was queued cannot hold the test forever.
        for _ in 0..<3 { gate.continuation.yield() }
        #expect(answeredAtOnce, "a third request is answered at once")
        do {
            _ = try await third.value
            Issue.record("a third request was queued")
        } catch let error as HeraldError {
            #expect(error.kind == .unavailable && error.code == "overloaded")
        }
        #expect(try await first.value == 1)
        #expect(try await second.value == 2)
    }

    /// Polls until `condition` holds. The deadline only bounds a failure: on a loaded machine
    /// (the whole suite, crash tests among it) the first request reached its commit only after
    /// more than 10 s, in two full-suite runs of five.
    static func eventually(_ condition: () throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if try condition() { return true }
            try await Task.sleep(for: .milliseconds(5))
        }
        return try condition()
    }
}

/// The committer runs above the requests it commits for, so a database answer resumes it ahead
/// of the handlers queued on the same pool.
@Suite(.cleansUp) struct GroupCommitPriorityTests {
    @Test func theCommitterRunsAtHighPriorityWhateverTheRequestsPriority() async throws {
        let seen = Mutex<[TaskPriority]>([])
        let commit = GroupCommit<Int, Int>(maxBatch: 10) { requests in
            seen.withLock { $0.append(Task.currentPriority) }
            return requests
        }
        for priority in [TaskPriority.low, .medium] {
            #expect(try await Task(priority: priority) { try await commit.submit(7) }.value == 7)
        }
        #expect(seen.withLock { $0 } == [.high, .high])
    }
}
