import Foundation
import HeraldCards
import HeraldCore
import HeraldTestSupport
import Logging
import PostgresNIO
import Synchronization
import Testing

@testable import HeraldStore

/// Writers of one user's rows take their locks in one order: the user's row, then their device
/// rows, then their deliveries (a registration's batch, an erasure, an unregistration, a
/// worker recording that a provider reported a device gone); their card counter, then their
/// cards (card writes, an erasure). Out of order, each of two holds what the other waits for
/// and PostgreSQL fails one of them as a deadlock. The store runs such a transaction again, so
/// each test also checks that none was rolled back.
@Suite(.cleansUp) struct PostgresLockOrderTests {
    let ids = ObjectIDGenerator()
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aRegistrationDuringAnErasureOfItsUserFinishesAfterIt() async throws {
        let (store, log) = try await migratedStore()
        _ = try await store.registerDevice(userID: "alice", registration: .token("tok-a", provider: "fcm"), newID: ids.next(), at: t0)

        // Another transaction holds alice's history lock, so the erasure stops there, holding
        // whatever it locked before it; the registration then starts, and locks what it can.
        let holder = await PostgresLockHolder.start(store) { session in
            try await PostgresStore.lockHistory(of: ["alice"], session)
        }
        let erasing = Task { try await store.eraseUser(userID: "alice", at: t0) }
        #expect(try await store.waitForLockWaiters(1) == 1, "the erasure waits for alice's history lock")
        let registering = Task {
            try await store.registerDevice(userID: "alice", registration: .token("tok-a", provider: "fcm"), newID: ids.next(), at: t0)
        }
        #expect(try await store.waitForLockWaiters(2) == 2, "the registration waits for the erasure")
        await holder.rollBack()

        let erased = try await erasing.value
        #expect(erased.devices == 1, "the erasure removed the device it found")
        let registered = try await registering.value
        #expect(registered.address.key == "tok-a")
        let devices = try await store.devices(userID: "alice")
        #expect(devices.map(\.address.key) == ["tok-a"], "the registration, after the erasure, stored the device again")
        #expect(log.conflicts == 0, "no transaction was rolled back to break a deadlock")
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aScoreUploadDuringAnErasureOfItsUserFinishesBeforeIt() async throws {
        let (store, log) = try await migratedStore()
        let cards = try CardStores.on(store)
        _ = try await cards.putCards([Card(id: "c1", metadata: [:], postedAt: t0)])
        _ = try await cards.applyScores([
            ScoreUpdate(userID: "alice", card: "c1", score: 1, timestamp: 1), ScoreUpdate(userID: "bob", card: "c1", score: 1, timestamp: 1),
        ])

        // Another transaction holds bob's card counter, so an upload for alice and bob stops
        // there holding alice's (counters are locked in user order), before its card writes.
        let holder = await PostgresLockHolder.start(store) { session in
            try await session.execute("SELECT user_id FROM card_users WHERE user_id = 'bob' FOR UPDATE")
        }
        let uploading = Task {
            try await cards.applyScores([
                ScoreUpdate(userID: "alice", card: "c1", score: 2, timestamp: 2), ScoreUpdate(userID: "bob", card: "c1", score: 2, timestamp: 2),
            ])
        }
        #expect(try await store.waitForLockWaiters(1) == 1, "the upload waits for bob's counter")
        let erasing = Task { try await store.eraseUser(userID: "alice", at: t0) }
        #expect(try await store.waitForLockWaiters(2) == 2, "the erasure waits for the upload")
        await holder.rollBack()

        #expect(try await uploading.value.applied == 2)
        _ = try await erasing.value
        let scores = try await store.withConnection { session in
            try await session.rows("SELECT user_id, score FROM user_cards ORDER BY user_id").map {
                "\(try $0.text("user_id"))=\(try $0.cell("score").decode(Double.self))"
            }
        }
        #expect(scores == ["bob=2.0"], "the upload committed first; the erasure then deleted alice's card")
        #expect(log.conflicts == 0, "no transaction was rolled back to break a deadlock")
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aDeviceReportedGoneWhileItIsUnregisteredIsRemovedOnce() async throws {
        let (store, log) = try await migratedStore()
        let device = try await store.registerDevice(userID: "alice", registration: .token("tok-a", provider: "fcm"), newID: ids.next(), at: t0)
        let n = HeraldNotification(id: ids.next(), type: "comment", title: "T", body: "B", url: nil, timestamp: t0, target: .users(["alice"]))
        _ = try await store.accept(
            n, recipients: 1, deliveries: [PlannedDelivery(sink: "fcm", userID: "alice", deviceID: device.id, distribution: .alert)],
            idempotencySince: t0)
        let push = try #require(try await store.claimDue(now: t0, limit: 10, lease: .seconds(30)).first)

        // Another transaction holds alice's history lock, so the unregistration stops there,
        // holding her device's row; the worker then records that FCM reported the token gone.
        let holder = await PostgresLockHolder.start(store) { session in
            try await PostgresStore.lockHistory(of: ["alice"], session)
        }
        let unregistering = Task { try await store.unregisterDevice(userID: "alice", provider: "fcm", addressKey: "tok-a", at: t0) }
        #expect(try await store.waitForLockWaiters(1) == 1, "the unregistration waits for alice's history lock")
        let recording = Task {
            try await store.record(
                [DeliveryUpdate(id: push.id, state: .failed, attempts: push.attempt, lastError: "gone", removeDevice: device.id)], at: t0)
        }
        #expect(try await store.waitForLockWaiters(2) == 2, "the record waits for the unregistration")
        await holder.rollBack()

        #expect(try await unregistering.value)
        try await recording.value
        let status = try #require(try await store.status(of: n.id))
        #expect(status.deliveries.map(\.lastError) == ["device was unregistered"], "the unregistration failed the push first")
        #expect(try await store.devices(userID: "alice").isEmpty)
        #expect(log.conflicts == 0, "no transaction was rolled back to break a deadlock")
    }

    /// A migrated store on a fresh database, whose conflict retries the test reads back.
    func migratedStore() async throws -> (PostgresStore, ConflictLog) {
        let log = ConflictLog()
        let store = try PostgresStore(
            url: try await PostgresTestDatabase.create(), acquireTimeout: PostgresStore.patientAcquireTimeout, modules: [.cards],
            logger: Logger(label: "test", factory: { _ in ConflictLog.Handler(log: log) }))
        TestResources.register { await store.close() }
        try await store.migrate()
        return (store, log)
    }

    /// Counts the store's notices that it ran a transaction again after a lock conflict.
    final class ConflictLog: Sendable {
        private let count = Mutex(0)
        var conflicts: Int { count.withLock { $0 } }

        struct Handler: LogHandler {
            let log: ConflictLog
            var metadata: Logger.Metadata = [:]
            var logLevel: Logger.Level = .trace
            subscript(metadataKey key: String) -> Logger.Metadata.Value? {
                get { metadata[key] }
                set { metadata[key] = newValue }
            }
            func log(event: LogEvent) {
                if "\(event.message)".contains("lock conflict") { log.count.withLock { $0 += 1 } }
            }
        }
    }
}
