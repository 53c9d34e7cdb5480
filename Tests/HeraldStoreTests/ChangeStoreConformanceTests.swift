import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Synchronization
import Testing

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

    /// Many writers adding rows for one user at once while a reader follows with
    /// `history(after:)`: the reader ends with every row, so no row committed behind a later
    /// sequence the reader had already passed.
    @Test(arguments: StoreKind.allCases)
    func aReaderFollowingConcurrentWritersMissesNothing(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let sent = try await stored(store, 40)
        let seen = try await withThrowingTaskGroup(of: [ObjectID].self) { group in
            for (index, id) in sent.enumerated() {
                group.addTask {
                    // Other users in the same batch, in varying order, as history batches are.
                    try await store.appendHistory([(id, "z\(index % 3)"), (id, "a"), (id, "b\(index % 5)")], at: t0)
                    return []
                }
            }
            group.addTask {
                var cursor: Int64 = 0
                var seen: [ObjectID] = []
                let deadline = ContinuousClock.now + .seconds(20)
                while seen.count < sent.count && ContinuousClock.now < deadline {
                    let rows = try await store.history(userID: "a", after: cursor, limit: 7)
                    seen += rows.map(\.item.notificationID)
                    cursor = rows.last?.sequence ?? cursor
                    if rows.isEmpty { try await Task.sleep(for: .milliseconds(2)) }
                }
                return seen
            }
            var all: [ObjectID] = []
            for try await part in group { all += part }
            return all
        }
        #expect(Set(seen) == Set(sent))
        #expect(seen.count == sent.count, "each row once")
    }

    @Test(arguments: StoreKind.allCases)
    func committedChangesAreAnnounced(_ kind: StoreKind) async throws {
        // On PostgreSQL a second store on the same database is another process's writer.
        let url = kind == .postgres ? try await PostgresTestDatabase.create() : nil
        let store: any ServerStorage
        if let url {
            store = try PostgresStore(url: url)
            TestResources.register { await store.close() }
            try await store.migrate()
        } else {
            store = try await kind.make()
        }
        let heard = Heard()
        let watching = Task { try await store.watchChanges { change in heard.changes.withLock { $0.append(change) } } }
        defer { watching.cancel() }
        func wait(for change: StoreChange, while act: () async throws -> Void) async throws -> Bool {
            // Acts until heard: the watcher may not be listening yet the first time.
            for _ in 0..<50 {
                try await act()
                for _ in 0..<20 {
                    if heard.changes.withLock({ $0.contains(change) }) { return true }
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
        #expect(try await wait(for: .attributes(users: ["c"])) { try await store.setAttributes(UserAttributes(tierID: "gold"), userID: "c") })
        #expect(try await wait(for: .content) { _ = try await store.publishContent(at: 1) })
        // A change another writer commits on the same database reaches this watcher too.
        if let url {
            let other = try PostgresStore(url: url)
            TestResources.register { await other.close() }
            #expect(try await wait(for: .attributes(users: ["d"])) { try await other.setAttributes(UserAttributes(), userID: "d") })
        }
    }
}

private final class Heard: Sendable {
    let changes = Mutex<[StoreChange]>([])
}
