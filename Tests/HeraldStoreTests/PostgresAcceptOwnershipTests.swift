import Foundation
import HeraldCore
import HeraldTestSupport
import PostgresNIO
import Synchronization
import Testing

@testable import HeraldStore

/// An accept for users reads their devices, plans pushes to them and commits; a registration
/// moving one of those devices to another user, an unregistration or an erasure committed in
/// between must still fail what the accept queued (and, erased, delete its history row), or
/// the accept's hand-off pushes to a device its user no longer has. On PostgreSQL the accept
/// holds each user's lock from before its read; SQLite runs both on its one writer.
@Suite(.cleansUp) struct PostgresAcceptOwnershipTests {
    let ids = ObjectIDGenerator()
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    enum Change: String, CaseIterable, Sendable, CustomStringConvertible {
        case moved, unregistered, erased
        var description: String { rawValue }
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"), arguments: Change.allCases)
    func aChangeWhileAnAcceptIsInFlightFailsWhatItQueued(_ change: Change) async throws {
        let store = try PostgresStore.patient(url: try await PostgresTestDatabase.create())
        TestResources.register { await store.close() }
        try await store.migrate()
        _ = try await store.registerDevice(userID: "alice", registration: .token("tok-shared", provider: "fcm"), newID: ids.next(), at: t0)
        let n = HeraldNotification(id: ids.next(), type: "comment", title: "T", body: "B", url: nil, timestamp: t0, target: .users(["alice"]))

        // Another transaction holds alice's history row for this notification, uncommitted: the
        // accept reads her devices, then waits on that row inside its write, until it rolls back.
        let holder = await PostgresLockHolder.start(store) { session in
            try await session.execute(
                "INSERT INTO history (notification_id, user_id, read, created_at) VALUES (\(n.id.hex), 'alice', 0, 0)")
        }
        let route: @Sendable (RecipientContext) -> [PlannedDelivery] = { context in
            [PlannedDelivery(sink: "history", userID: context.userID, distribution: .alert)]
                + context.devices.map { PlannedDelivery(sink: "fcm", userID: context.userID, deviceID: $0.id, distribution: .alert) }
        }
        let handOff = DeliveryHandOff(capacity: 10, lease: .seconds(30))
        let accepting = Task {
            try await store.acceptUsers(n, userIDs: ["alice"], route: route, idempotency: nil, idempotencySince: t0, handOff: handOff)
        }
        #expect(try await store.waitForLockWaiters(1) == 1, "the accept read alice's devices and waits to write")

        let changed = Mutex(false)
        let changing = Task {
            switch change {
            case .moved:
                _ = try await store.registerDevice(userID: "bob", registration: .token("tok-shared", provider: "fcm"), newID: ids.next(), at: t0)
            case .unregistered:
                #expect(try await store.unregisterDevice(userID: "alice", provider: "fcm", addressKey: "tok-shared", at: t0))
            case .erased:
                _ = try await store.eraseUser(userID: "alice", at: t0)
            }
            changed.withLock { $0 = true }
        }
        // The change either waits for the accept (a second waiter) or, unordered, commits first.
        _ = try await store.waitForLockWaiters(2, orUntil: { changed.withLock { $0 } })
        #expect(!changed.withLock { $0 }, "the \(change) waited for the accept in flight")
        await holder.rollBack()
        #expect(try await accepting.value == .accepted(NotificationReceipt(id: n.id, recipients: 1)))
        try await changing.value

        let pushes = try #require(try await store.status(of: n.id)).deliveries.filter { $0.sink == "fcm" }
        #expect(pushes.count == 1, "the accept read the device before the change")
        #expect(pushes.allSatisfy { $0.state == .failed }, "the push was failed, not left to the hand-off: \(pushes)")
        if change == .erased {
            #expect(try await store.history(userID: "alice", limit: 10, before: nil).items.isEmpty, "no history row outlives the erasure")
        }
    }
}
