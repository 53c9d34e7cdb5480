import Foundation
import HeraldCore
import HeraldTestSupport
import Synchronization
import Testing

@testable import HeraldStore

/// What live streams rely on, on every engine: history read forward from a sequence, in commit
/// order per user, and committed changes announced to watchers (across connections on
/// PostgreSQL).
@Suite(.cleansUp) struct ChangeStoreConformanceTests {
    let ids = ObjectIDGenerator()
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    func stored(_ store: any ServerStorage, _ count: Int) async throws -> [ObjectID] {
        var sent: [ObjectID] = []
        for i in 0..<count {
            let at = t0.addingTimeInterval(Double(i))
            let n = HeraldNotification(
                id: ids.next(at: at), type: "comment", title: "T\(i)", body: "B", url: nil, data: [:], timestamp: at, priority: 3, expiresAt: nil,
                collapseKey: nil, idempotencyKey: nil, target: .users(["a"])
            )
            _ = try await store.accept(n, recipients: 1, deliveries: [], idempotencySince: t0)
            sent.append(n.id)
        }
        return sent
    }

    @Test(arguments: StoreKind.allCases)
    func historyReadsForwardFromASequence(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        #expect(try await store.lastHistorySequence(userID: "a") == 0)
        #expect(try await store.history(userID: "a", after: 0, limit: 10).isEmpty)
        let sent = try await stored(store, 5)
        for id in sent { try await store.appendHistory([(id, "a"), (id, "b")], at: t0) }

        let all = try await store.history(userID: "a", after: 0, limit: 10)
        #expect(all.map(\.item.notificationID) == sent, "oldest first")
        #expect(all.map(\.item.title) == ["T0", "T1", "T2", "T3", "T4"])
        #expect(zip(all, all.dropFirst()).allSatisfy { $0.sequence < $1.sequence })
        #expect(try await store.lastHistorySequence(userID: "a") == all.last?.sequence)

        let rest = try await store.history(userID: "a", after: all[1].sequence, limit: 2)
        #expect(rest.map(\.item.notificationID) == Array(sent[2..<4]), "after the given sequence, at most `limit`")
        #expect(try await store.history(userID: "a", after: all[4].sequence, limit: 10).isEmpty)
        #expect(try await store.history(userID: "b", after: 0, limit: 10).count == 5)
    }

    /// A Message Hub notification for `topic`'s subscribers: their history rows only.
    func messageHub(_ store: any ServerStorage, topic: String, inlineLimit: Int = .max) async throws -> ObjectID {
        let n = HeraldNotification(
            id: ids.next(at: t0), type: "generic", title: "M", body: "B", url: nil, data: [:], timestamp: t0, priority: 3, expiresAt: nil,
            collapseKey: nil, idempotencyKey: nil, target: .topic(topic))
        _ = try await store.acceptFanOut(
            n, topic: topic, level: .optIn, plan: .historyOnly, extra: [], archive: nil, pageSize: 50, inlineLimit: inlineLimit, idempotency: nil,
            idempotencySince: t0)
        return n.id
    }

    /// Many writers adding rows for one user at once, per-user writers and fan-outs to a topic
    /// with many subscribers, while a reader follows with `history(after:)`: the reader ends with
    /// every row, so no row committed behind a later sequence the reader had already passed.
    @Test(arguments: StoreKind.allCases)
    func aReaderFollowingConcurrentWritersMissesNothing(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let topic = try await TopicTree.make(in: store, ids: ids).optIn.topicKey
        for user in ["a"] + (0..<300).map({ "s\($0)" }) { try await store.subscribe(userID: user, topicKey: topic, at: t0) }
        let appended = try await stored(store, 40)
        // Each task's rows: the fan-outs' notifications, or those the reader saw.
        let writers = appended.count + (appended.count + 3) / 4
        let finished = FinishedWriters()
        let (hubs, seen) = try await withThrowingTaskGroup(of: (hubs: [ObjectID], seen: [ObjectID]).self) { group in
            for (index, id) in appended.enumerated() {
                group.addTask {
                    defer { finished.count.add(1, ordering: .relaxed) }
                    // Other users in the same batch, in varying order, as history batches are.
                    try await store.appendHistory([(id, "z\(index % 3)"), (id, "a"), (id, "b\(index % 5)")], at: t0)
                    return ([], [])
                }
                if index % 4 == 0 {
                    group.addTask {
                        defer { finished.count.add(1, ordering: .relaxed) }
                        return ([try await messageHub(store, topic: topic)], [])
                    }
                }
            }
            group.addTask {
                var cursor: Int64 = 0
                var seen: [ObjectID] = []
                // The reader follows the writers however long they take (a full suite on two
                // cores has kept them past 20 s; 5 minutes at most), then has 10 s more to read
                // what they wrote.
                var deadline: ContinuousClock.Instant?
                let giveUp = ContinuousClock.now + .seconds(300)
                while seen.count < writers && ContinuousClock.now < (deadline ?? giveUp) {
                    if deadline == nil, finished.count.load(ordering: .relaxed) == writers { deadline = .now + .seconds(10) }
                    let rows = try await store.history(userID: "a", after: cursor, limit: 7)
                    seen += rows.map(\.item.notificationID)
                    cursor = rows.last?.sequence ?? cursor
                    if rows.isEmpty { try await Task.sleep(for: .milliseconds(2)) }
                }
                return ([], seen)
            }
            var all: (hubs: [ObjectID], seen: [ObjectID]) = ([], [])
            for try await part in group { (all.hubs, all.seen) = (all.hubs + part.hubs, all.seen + part.seen) }
            return all
        }
        let sent = appended + hubs
        #expect(Set(seen) == Set(sent))
        #expect(seen.count == sent.count, "each row once")
    }

    /// On PostgreSQL a fan-out and a per-user writer could otherwise commit their rows for a
    /// user out of sequence order: here the per-user writer takes its sequence first and commits
    /// last, while a reader follows. The fan-out must wait for it, or the reader, having seen the
    /// fan-out's row, would never see the earlier one.
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aFanOutWaitsForHistoryWrittenBeforeIt() async throws {
        let store = try PostgresStore.patient(url: try await PostgresTestDatabase.create())
        TestResources.register { await store.close() }
        try await store.migrate()
        let topic = try await TopicTree.make(in: store, ids: ids).optIn.topicKey
        try await store.subscribe(userID: "a", topicKey: topic, at: t0)
        let first = try #require(try await stored(store, 1).first)

        let (committing, commit) = AsyncStream<Void>.makeStream()
        let (hasWritten, written) = AsyncStream<Void>.makeStream()
        let perUser = Task {
            try await store.transaction { session in
                try await PostgresStore.writeHistory([(first.hex, "a", 1)], leases: nil, session)
                written.yield()
                for await _ in committing { break }
            }
        }
        for await _ in hasWritten { break }
        let fanOut = Task { try await messageHub(store, topic: topic) }
        // Time for a fan-out that did not wait to commit its later sequence.
        try await Task.sleep(for: .milliseconds(300))
        var seen = try await store.history(userID: "a", after: 0, limit: 10)
        commit.yield()
        try await perUser.value
        let hub = try await fanOut.value
        seen += try await store.history(userID: "a", after: seen.last?.sequence ?? 0, limit: 10)
        #expect(seen.map(\.item.notificationID) == [first, hub], "each row once, in commit order")
    }

    @Test(arguments: StoreKind.allCases)
    func committedChangesAreAnnounced(_ kind: StoreKind) async throws {
        // On PostgreSQL a second store on the same database is another process's writer.
        let url = kind == .postgres ? try await PostgresTestDatabase.create() : nil
        let store: any ServerStorage
        if let url {
            store = try PostgresStore.patient(url: url)
            TestResources.register { await store.close() }
            try await store.migrate()
        } else {
            store = try await kind.make()
        }
        let heard = Heard()
        let watching = Task { try await store.watchChanges { change in heard.changes.withLock { $0.append(change) } } }
        defer { watching.cancel() }
        func wait(for change: StoreChange, while act: () async throws -> Void) async throws -> Bool {
            try await wait(until: { $0 == change }, while: act)
        }
        func wait(until heardOne: (StoreChange) -> Bool, while act: () async throws -> Void) async throws -> Bool {
            // Acts until heard: the watcher may not be listening yet the first time.
            heard.changes.withLock { $0.removeAll() }
            for _ in 0..<50 {
                try await act()
                for _ in 0..<20 {
                    if heard.changes.withLock({ $0.contains(where: heardOne) }) { return true }
                    try await Task.sleep(for: .milliseconds(10))
                }
            }
            return false
        }
        let sent = try await stored(store, 1)
        #expect(try await wait(for: .history(users: ["a", "b"])) { try await store.appendHistory([(sent[0], "a"), (sent[0], "b"), (sent[0], "a")], at: t0) })
        // An accept for users writes their history rows itself, and says so.
        let historyOnly: @Sendable (RecipientContext) -> [PlannedDelivery] = { [PlannedDelivery(sink: "history", userID: $0.userID, distribution: .alert)] }
        #expect(
            try await wait(for: .history(users: ["e", "f"])) {
                let n = HeraldNotification(
                    id: ids.next(at: t0), type: "comment", title: "T", body: "B", url: nil, data: [:], timestamp: t0, priority: 3, expiresAt: nil,
                    collapseKey: nil, idempotencyKey: nil, target: .users(["e", "f"]))
                _ = try await store.acceptUsers(n, userIDs: ["e", "f"], route: historyOnly, idempotency: nil, idempotencySince: t0)
            })
        // So do fan-outs, for the subscribers whose rows they write, inline or page by page.
        let topic = try await TopicTree.make(in: store, ids: ids).optIn.topicKey
        for user in ["g", "h"] { try await store.subscribe(userID: user, topicKey: topic, at: t0) }
        let bothSubscribers: (StoreChange) -> Bool = { change in
            guard case .history(let users) = change else { return false }
            return Set(users) == ["g", "h"] && users.count == 2
        }
        #expect(try await wait(until: bothSubscribers) { _ = try await messageHub(store, topic: topic) })
        #expect(
            try await wait(until: bothSubscribers) {
                let id = try await messageHub(store, topic: topic, inlineLimit: 1)
                _ = try await store.writeFanOutPage(of: id, pageSize: 10) { _ in [] }
            })
        // And a scheduled send's page, which writes the rows of those it routes to history.
        #expect(
            try await wait(for: .history(users: ["i"])) {
                let n = HeraldNotification(id: ids.next(at: t0), type: "comment", title: "T", body: "B", url: nil, timestamp: t0, target: .users(["i"]))
                _ = try await store.acceptScheduled(
                    n, recipients: .users(["i"]), dueAt: Date().addingTimeInterval(-1), idempotency: nil, idempotencySince: t0)
                _ = try await store.writeFanOutPage(of: n.id, pageSize: 10, route: historyOnly)
            })
        #expect(try await wait(for: .attributes(users: ["c"])) { try await store.setAttributes(UserAttributes(tierID: "gold"), userID: "c") })
        // A feature module's transaction announces what it names, once committed.
        #expect(try await wait(for: .content) { _ = try await store.transaction([SharedStatement("SELECT 1 AS one")], announcing: .content) })
        #expect(try await wait(for: .feed) { _ = try await store.results(of: [], announcing: .feed) })
        // A change another writer commits on the same database reaches this watcher too.
        if let url {
            let other = try PostgresStore.patient(url: url)
            TestResources.register { await other.close() }
            #expect(try await wait(for: .attributes(users: ["d"])) { try await other.setAttributes(UserAttributes(), userID: "d") })
        }
    }
}

private final class Heard: Sendable {
    let changes = Mutex<[StoreChange]>([])
}

/// How many of a test's writer tasks have ended, shared with the reader that follows them.
private final class FinishedWriters: Sendable {
    let count = Atomic(0)
}
