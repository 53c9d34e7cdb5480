import Foundation
import GRDB
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Synchronization
import Testing

/// A push's outcome that storage refuses for a moment (the SQLite file locked by another
/// process while the sink was sending) is recorded once storage is back, not given up: given
/// up, the push stayed leased and was sent a second time when its lease ran out.
@Suite(.cleansUp) struct RecordRetryTests {
    /// Sends by taking the database's write lock from another connection, held `hold` after it
    /// answers, so the engine's record of that answer finds the file locked.
    final class LockingSink: NotificationSink {
        let name = "fcm"
        let capabilities = SinkCapabilities.push
        let providers = DeviceProviders.all
        let path: String
        let hold: TimeInterval
        private let sends = Mutex(0)
        var sent: Int { sends.withLock { $0 } }

        init(path: String, hold: TimeInterval) {
            (self.path, self.hold) = (path, hold)
        }

        func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] {
            sends.withLock { $0 += batch.count }
            let (path, hold) = (self.path, self.hold)
            await withCheckedContinuation { (locked: CheckedContinuation<Void, Never>) in
                Thread.detachNewThread {
                    guard let other = try? DatabaseQueue(path: path) else { return locked.resume() }
                    try? other.writeWithoutTransaction { db in
                        try db.execute(sql: "BEGIN EXCLUSIVE")
                        locked.resume()
                        Thread.sleep(forTimeInterval: hold)
                        try db.execute(sql: "COMMIT")
                    }
                }
            }
            return batch.map { _ in .delivered }
        }

        func health() async -> SinkHealth { .ok }
    }

    @Test func anOutcomeRefusedForAMomentIsRecordedOnceStorageIsBack() async throws {
        let directory = try TestResources.temporaryDirectory("herald-record-retry")
        let path = directory.appendingPathComponent("h.sqlite").path
        // Each write waits 200 ms for the lock, then fails: the record fails several times.
        let store = try SQLiteStore(path: path, busyTimeout: .milliseconds(200))
        TestResources.register { await store.close() }
        try await store.migrate()
        let device = try await store.registerDevice(
            userID: "alice", registration: .token("tok", provider: "fcm"), newID: ObjectIDGenerator().next(), at: Date())
        let n = HeraldNotification(
            id: ObjectIDGenerator().next(), type: "comment", title: "T", body: "B", url: nil, timestamp: Date(), target: .users(["alice"]))
        _ = try await store.accept(
            n, recipients: 1, deliveries: [PlannedDelivery(sink: "fcm", userID: "alice", deviceID: device.id, distribution: .alert)], idempotencySince: Date())

        let sink = LockingSink(path: path, hold: 1.5)
        let engine = DeliveryEngine(queue: store, sinks: try SinkRegistry([sink]), configuration: DeliveryEngineConfiguration())
        #expect(try await engine.processDue() == 1, "the batch ends once its outcome is recorded")
        let status = try #require(try await store.status(of: n.id))
        #expect(status.deliveries.map(\.state) == [.delivered], "recorded after the lock was released, not left leased to be sent again")
        #expect(sink.sent == 1)
    }
}
