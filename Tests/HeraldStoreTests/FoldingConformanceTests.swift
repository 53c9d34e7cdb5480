import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

/// Frequency caps and digests on every engine (docs/timing.md): held deliveries are counted once
/// per notification, user and key; the first `max` of a window go out, the rest fold into the
/// window's digest, released when it ends as one notification (or as itself when alone).
@Suite(.cleansUp) struct FoldingConformanceTests {
    let ids = ObjectIDGenerator()

    func notification(_ title: String, type: String = "upvote") -> HeraldNotification {
        HeraldNotification(id: ids.next(), type: type, title: title, body: "", url: nil, timestamp: Date(), target: .users(["ann"]))
    }

    /// Accepts `notification` for Ann with two push deliveries (two devices) under `mark`, and
    /// a history row that never folds.
    func accept(_ notification: HeraldNotification, _ store: any HeraldStorage, mark: FoldMark) async throws {
        let pushes = (0..<2).map { _ in PlannedDelivery(sink: "push", userID: "ann", deviceID: ids.next(), distribution: .alert, fold: mark) }
        _ = try await store.accept(
            notification, recipients: 1, deliveries: pushes + [PlannedDelivery(sink: "history", userID: "ann", distribution: .alert)],
            idempotencySince: Date())
    }

    func states(_ id: ObjectID, _ store: any HeraldStorage) async throws -> [String: [DeliveryState: Int]] {
        try #require(try await store.status(of: id)).summary
    }

    /// A composer that records what it was given and makes a two-push digest.
    final class Composer: @unchecked Sendable {
        let lock = NSLock()
        var seen: [DueDigest] = []
        let ids = ObjectIDGenerator()

        func compose(_ digest: DueDigest, _ recipient: RecipientContext) -> ComposedDigest {
            lock.withLock { seen.append(digest) }
            let notification = HeraldNotification(
                id: ids.next(), type: "upvote", title: "\(digest.items.count) new", body: "", url: nil, timestamp: digest.dueAt,
                target: .users([digest.userID]))
            return ComposedDigest(notification: notification, deliveries: [PlannedDelivery(sink: "push", userID: digest.userID, distribution: .alert)])
        }

        var digests: [DueDigest] { lock.withLock { seen } }
    }

    @Test(arguments: StoreKind.allCases)
    func theFirstOfAWindowGoOutAndTheRestFoldIntoOneDigest(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let cap = FoldMark(key: "cap:votes", max: 2, seconds: 1)
        let sent = (1...4).map { notification("vote \($0)") }
        for item in sent { try await accept(item, store, mark: cap) }
        #expect(try await states(sent[0].id, store)["push"] == [.held: 2], "held for the count")
        #expect(try await store.claimDue(now: Date().addingTimeInterval(1), limit: 100, lease: .seconds(60)).allSatisfy { $0.sink == "history" })

        // Retention never takes what still waits for a count.
        let later = Date().addingTimeInterval(86_400)
        _ = try await store.purgeFinishedDeliveries(before: later, limit: 100)
        #expect(try await states(sent[0].id, store)["push"] == [.held: 2])
        #expect(try await store.foldHeld(limit: 100) == 4, "each notification counted once, whatever its devices")
        // Nor what a digest not yet released holds.
        _ = try await store.purgeFinishedDeliveries(before: later, limit: 100)
        #expect(try await store.purgeNotifications(before: later, after: nil, limit: 100).deleted == 0)
        #expect(try await states(sent[3].id, store)["push"] == [.folded: 2])
        #expect(try await store.foldHeld(limit: 100) == 0)
        for item in sent.prefix(2) { #expect(try await states(item.id, store)["push"] == [.pending: 2]) }
        for item in sent.suffix(2) { #expect(try await states(item.id, store)["push"] == [.folded: 2]) }
        #expect(try await states(sent[3].id, store)["history"] == [.pending: 1], "history keeps every item")
        let until = try #require(try await store.untilNextDigest())
        let windowEnd = Date().addingTimeInterval(until.seconds)
        #expect(until <= .seconds(1))

        let composer = Composer()
        let early = try await store.releaseDueDigests(limit: 10, compose: composer.compose)
        // On a loaded machine the window may have ended already: then this is its release.
        #expect(early == 0 || Date() >= windowEnd, "not before the window ends")
        if early == 0 {
            try await Task.sleep(for: until + .milliseconds(50))
            #expect(try await store.releaseDueDigests(limit: 10, compose: composer.compose) == 1)
        }
        let digest = try #require(composer.digests.first)
        #expect(digest.userID == "ann" && digest.key == "cap:votes")
        #expect(digest.items.map(\.title) == ["vote 3", "vote 4"], "the folded items, oldest first")
        #expect(try await store.untilNextDigest() == nil)
        #expect(try await store.releaseDueDigests(limit: 10, compose: composer.compose) == 0, "once")
        for item in sent.suffix(2) { #expect(try await states(item.id, store)["push"] == [.folded: 2], "the items stay folded") }
        // Released, they are finished: retention may take them.
        #expect(try await store.purgeFinishedDeliveries(before: later, limit: 100) == 4)

        // The window has ended: the next notification opens a new one and goes out.
        let next = notification("vote 5")
        try await accept(next, store, mark: cap)
        #expect(try await store.foldHeld(limit: 100) == 1)
        #expect(try await states(next.id, store)["push"] == [.pending: 2])
        await store.close()
    }

    @Test(arguments: StoreKind.allCases)
    func aDigestOfOneSendsTheItemItselfAndACancelTakesWhatIsHeldOrFolded(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let key = FoldMark(key: FoldMark.digestKey("chat-42"), max: 0, seconds: 1)
        let alone = notification("only one", type: "message")
        try await accept(alone, store, mark: key)
        #expect(try await store.foldHeld(limit: 100) == 1)
        #expect(try await states(alone.id, store)["push"] == [.folded: 2], "max 0: even the first waits for the window's end")
        try await Task.sleep(for: .milliseconds(1_050))
        let composer = Composer()
        #expect(try await store.releaseDueDigests(limit: 10, compose: composer.compose) == 1)
        #expect(composer.digests.isEmpty, "nothing composed for one item")
        #expect(try await states(alone.id, store)["push"] == [.pending: 2], "it goes out as itself")

        // Cancelled while held, or once folded: nothing goes out, the digest forgets it.
        let held = notification("held")
        try await accept(held, store, mark: FoldMark(key: "cap:x", max: 5, seconds: 60))
        #expect(try await store.cancel(id: held.id, at: Date())?.deliveries == 3, "two held pushes and the history row")
        let folded = notification("folded")
        try await accept(folded, store, mark: FoldMark(key: "cap:y", max: 0, seconds: 3600))
        #expect(try await store.foldHeld(limit: 100) == 1)
        #expect(try await store.untilNextDigest() != nil)
        #expect(try await store.cancel(id: folded.id, at: Date())?.deliveries == 3)
        #expect(try await store.untilNextDigest() == nil, "its digest item went with it")
        await store.close()
    }

    /// An erased user's counters and digests go with their data.
    @Test(arguments: StoreKind.allCases)
    func anErasureTakesTheUsersDigests(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let folded = notification("folded")
        try await accept(folded, store, mark: FoldMark(key: "cap:y", max: 0, seconds: 3600))
        #expect(try await store.foldHeld(limit: 100) == 1)
        _ = try await store.eraseUser(userID: "ann", at: Date())
        #expect(try await store.untilNextDigest() == nil)
        #expect(try await states(folded.id, store)["push"] == [.failed: 2])
        await store.close()
    }

    /// Processes counting at once never let more than `max` through (on PostgreSQL one takes
    /// the step at a time; SQLite has one writer).
    @Test(arguments: StoreKind.allCases)
    func concurrentCountsStayExact(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let cap = FoldMark(key: "cap:votes", max: 3, seconds: 3600)
        let sent = (1...40).map { notification("vote \($0)") }
        for item in sent { try await accept(item, store, mark: cap) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    var idle = 0
                    while idle < 20 {
                        idle = try await store.foldHeld(limit: 3) == 0 ? idle + 1 : 0
                    }
                }
            }
            try await group.waitForAll()
        }
        var out = 0
        var folded = 0
        for item in sent {
            let push = try await states(item.id, store)["push"] ?? [:]
            out += push[.pending] ?? 0
            folded += push[.folded] ?? 0
        }
        #expect(out == 3 * 2 && folded == 37 * 2, "three notifications (two devices each) through, the rest folded")
        await store.close()
    }
}
