import Foundation
import HeraldCore
import HeraldTestSupport
import PostgresNIO
import Testing

@testable import HeraldStore

/// A group commit claims its idempotency keys in key order: a claim holds the key's row lock
/// until the commit, so two processes whose batches held the same keys in opposite orders
/// would each wait for the other, and PostgreSQL would fail one whole batch to break it.
@Suite(.cleansUp) struct PostgresIdempotencyOrderTests {
    let ids = ObjectIDGenerator()
    let t0 = Date()

    func notification() -> HeraldNotification {
        HeraldNotification(
            id: ids.next(at: t0), type: "comment", title: "T", body: "B", url: nil, data: [:], timestamp: t0, priority: 0, expiresAt: nil,
            collapseKey: nil, idempotencyKey: nil, target: .users(["a"]))
    }

    func claim(_ key: String) -> IdempotencyClaim { IdempotencyClaim(scope: "backend-1", key: key, requestHash: "hash-\(key)") }

    /// Another process holds "k1". A batch of ["k2", "k1"] must wait for it before it touches
    /// "k2", so the other process can still take "k2" (with claims in request order the batch
    /// held "k2" and waited for "k1": each waited for the other).
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aBatchClaimsItsKeysInKeyOrder() async throws {
        let store = try PostgresStore.patient(url: try await PostgresTestDatabase.create())
        TestResources.register { await store.close() }
        try await store.migrate()
        let since = t0.addingTimeInterval(-86_400)
        let (held, holding) = AsyncStream.makeStream(of: Void.self)
        let (probe, probing) = AsyncStream.makeStream(of: Void.self)
        let (first, second) = (notification(), notification())

        let other = Task {
            try await store.transaction { session in
                _ = try await PostgresStore.claim(claim("k1"), for: first, recipients: 1, session, since: since)
                holding.yield()
                for await _ in probe { break }
                try await session.execute("SET LOCAL lock_timeout = '2s'")
                _ = try await PostgresStore.claim(claim("k2"), for: second, recipients: 1, session, since: since)
            }
        }
        for await _ in held { break }
        let requests = ["k2", "k1"].map {
            AcceptRequest(
                notification: notification(), plan: .planned(recipients: 1, deliveries: []), idempotency: claim($0), idempotencySince: since,
                handOff: nil)
        }
        let batch = Task { try await store.transaction { session in try await PostgresStore.accept(batch: requests, session, modules: .none) } }

        // The batch is waiting on a row lock before the other process goes on.
        #expect(try await store.waitForLockWaiters(1) == 1, "the batch waits on the other process's key")
        probing.yield()

        let otherResult = await other.result
        #expect(throws: Never.self, "the other process took k2: the batch had not touched it") { try otherResult.get() }
        let outcomes = try await batch.value.map(\.result)
        #expect(outcomes == [.replayed(NotificationReceipt(id: second.id, recipients: 1)), .replayed(NotificationReceipt(id: first.id, recipients: 1))])
    }
}
