import Foundation
import HeraldCore
import HeraldTestSupport
import PostgresNIO
import Synchronization
import Testing

@testable import HeraldStore

/// PostgreSQL's deliveries partitioned by the month of their ids, which are made from time
/// (docs/durability.md, "Month partitions on PostgreSQL"): a new database's from the start, an
/// existing one's while writes go on; retention drops a month once every delivery in it is
/// final and old enough, and deletes the rest in batches.
@Suite(.cleansUp) struct DeliveryPartitionTests {
    let ids = ObjectIDGenerator()
    static let deliveries = MonthPartitionedTable.deliveries

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aNewDatabasesDeliveriesArePartitionedAndTheirIdsAreTheirSeconds() async throws {
        let store = try await HistoryPartitionTests.store()
        try await store.migrate()
        let now = Date()
        let names = try await store.partitionNames(of: .deliveries)
        let expected = (0...MonthPartitionedTable.monthsAhead).map { Self.deliveries.month(now, offset: $0).name }
        #expect(Set(names) == Set(expected + [Self.deliveries.defaultPartition]), "this month, the next two and the default: \(names)")

        let notification = HeraldNotification(id: ids.next(), type: "comment", title: "T", body: "B", url: nil, timestamp: now, target: .users(["a", "b"]))
        _ = try await store.accept(
            notification, recipients: 2,
            deliveries: [PlannedDelivery(sink: "history", userID: "a", distribution: .alert), PlannedDelivery(sink: "fcm", userID: "b", distribution: .alert)],
            idempotencySince: now)
        let claimed = try await store.claimDue(now: now, limit: 10, lease: .seconds(30))
        #expect(claimed.count == 2)
        for delivery in claimed {
            let second = delivery.id >> DeliveryIDs.sequenceBits
            #expect(abs(second - Int64(now.timeIntervalSince1970)) < 60, "an id holds the second it was drawn: \(delivery.id)")
            #expect(delivery.id < 1 << 53, "and a JSON reader holding doubles reads it exactly")
        }
        try await store.record(claimed.map { DeliveryUpdate(id: $0.id, state: .delivered, attempts: 1) }, at: now)
        #expect(try await store.status(of: notification.id)?.deliveries.map(\.state) == [.delivered, .delivered])
        #expect(try await store.rowsByPartition(of: .deliveries) == [Self.deliveries.month(now).name: 2])
        #expect(try await Self.olderHeraldsNextID(store) != nil, "the column's sequence is found as an older Herald finds it")
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func retentionDropsAMonthOnceEveryDeliveryInItIsFinalAndOld() async throws {
        let store = try await HistoryPartitionTests.store()
        try await store.migrate()
        let cutoff = HistoryPartitionTests.date(2025, 4)
        let created = try await store.createPartitions(
            of: .deliveries, from: HistoryPartitionTests.date(2024, 12), through: HistoryPartitionTests.date(2025, 3))
        #expect(created == ["deliveries_y2024m12", "deliveries_y2025m01", "deliveries_y2025m02", "deliveries_y2025m03"])

        // December: an old delivery, and one retried until after the cutoff.
        try await Self.insert(store, at: HistoryPartitionTests.date(2024, 12, 3), state: "delivered", updated: HistoryPartitionTests.date(2024, 12, 3))
        try await Self.insert(store, at: HistoryPartitionTests.date(2024, 12, 4), state: "failed", updated: HistoryPartitionTests.date(2025, 4, 2))
        // January: all final and old.
        for day in 1...10 {
            let at = HistoryPartitionTests.date(2025, 1, day)
            try await Self.insert(store, at: at, state: day % 3 == 0 ? "dead" : "delivered", updated: at)
        }
        // February: a push still pending beside two delivered.
        try await Self.insert(store, at: HistoryPartitionTests.date(2025, 2, 2), state: "delivered", updated: HistoryPartitionTests.date(2025, 2, 2))
        try await Self.insert(store, at: HistoryPartitionTests.date(2025, 2, 3), state: "delivered", updated: HistoryPartitionTests.date(2025, 2, 3))
        try await Self.insert(store, at: HistoryPartitionTests.date(2025, 2, 4), state: "pending", updated: HistoryPartitionTests.date(2025, 2, 4))
        // March: one held for a digest beside one delivered.
        try await Self.insert(store, at: HistoryPartitionTests.date(2025, 3, 2), state: "held", updated: HistoryPartitionTests.date(2025, 3, 2))
        try await Self.insert(store, at: HistoryPartitionTests.date(2025, 3, 3), state: "delivered", updated: HistoryPartitionTests.date(2025, 3, 3))
        // The default partition: an id no month takes. And this month's.
        try await Self.insert(store, at: HistoryPartitionTests.date(2020, 1, 2), state: "delivered", updated: HistoryPartitionTests.date(2020, 1, 2))
        try await Self.insert(store, at: Date(), state: "delivered", updated: Date())

        let removed = try await store.purgeFinishedDeliveries(before: cutoff, limit: 1000)
        #expect(removed == 10 + 1 + 2 + 1 + 1, "January dropped (10), then December's old one, February's two, March's one and the default's deleted")
        let names = try await store.partitionNames(of: .deliveries)
        #expect(!names.contains("deliveries_y2025m01"), "January is dropped")
        #expect(names.contains("deliveries_y2024m12"), "December holds a delivery changed after the cutoff")
        #expect(names.contains("deliveries_y2025m02"), "February holds a pending delivery")
        #expect(names.contains("deliveries_y2025m03"), "March holds a held one")
        #expect(
            try await store.rowsByPartition(of: .deliveries) == [
                "deliveries_y2024m12": 1, "deliveries_y2025m02": 1, "deliveries_y2025m03": 1, Self.deliveries.month(Date()).name: 1,
            ])
        #expect(try await store.purgeFinishedDeliveries(before: cutoff, limit: 1000) == 0, "nothing finished is left past the cutoff")
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func existingDeliveriesArePartitionedWhileWritesGoOn() async throws {
        let store = try await HistoryPartitionTests.store()
        try await store.migrateAsBeforePartitions()
        // Deliveries written before partitions, with the identity's ids.
        for day in stride(from: 200, through: 0, by: -5) {
            let at = Date().addingTimeInterval(-Double(day) * 86_400)
            try await Self.insertWithoutID(store, at: at, state: day % 4 == 0 ? "failed" : "delivered")
        }
        try await store.migrate()
        #expect(try await store.partitionNames(of: .deliveries).isEmpty, "deliveries with rows are left unpartitioned by the migration")
        let identityIDs = try await Self.rowsByID(store).map(\.id)
        #expect(identityIDs.allSatisfy { $0 < 1_000 }, "the identity's ids")
        // An older Herald still running (a rolling upgrade) draws small ids past the identity's.
        let olderHeralds = try #require(try await Self.olderHeraldsNextID(store))
        #expect(olderHeralds > (identityIDs.max() ?? 0) && olderHeralds < 1_000, "\(olderHeralds)")
        try await Self.insert(store, id: olderHeralds, state: "delivered", updated: Date())
        // And one accepted since, still pending: ids made from time, below the coming bound.
        let old = HeraldNotification(id: ids.next(), type: "comment", title: "T", body: "B", url: nil, timestamp: Date(), target: .users(["a"]))
        _ = try await store.accept(old, recipients: 1, deliveries: [PlannedDelivery(sink: "fcm", userID: "a", distribution: .alert)], idempotencySince: Date())
        let before = try await Self.rowsByID(store)

        // Writes go on while it converts, with ids made from time: none is refused or lost.
        let stop = Mutex(false)
        let writer = Task {
            var count = 0
            while !stop.withLock({ $0 }) {
                try await Self.insertWithoutID(store, at: Date(), state: "delivered")
                count += 1
            }
            return count
        }
        let steps = Mutex<[String]>([])
        try await store.partition(.deliveries) { step in steps.withLock { $0.append(step) } }
        try await Task.sleep(for: .milliseconds(100))
        stop.withLock { $0 = true }
        let concurrent = try await writer.value
        #expect(steps.withLock { $0 }.contains { $0.hasPrefix("deliveries is partitioned") }, "\(steps.withLock { $0 })")

        let names = try await store.partitionNames(of: .deliveries)
        #expect(names.contains(Self.deliveries.legacyPartition) && names.contains(Self.deliveries.defaultPartition))
        let after = try await Self.rowsByID(store)
        #expect(Array(after.prefix(before.count)) == before, "every delivery kept its id")
        #expect(after.count == before.count + concurrent, "and every one written meanwhile is there too")
        #expect(after.dropFirst(before.count).allSatisfy { $0.id >> DeliveryIDs.sequenceBits > 1_700_000_000 }, "new ids are made from time")

        // The pending delivery from before is claimed and recorded on the partitioned table.
        let claimed = try await store.claimDue(now: Date(), limit: 10, lease: .seconds(30))
        #expect(claimed.map(\.notification.id) == [old.id])
        try await store.record(claimed.map { DeliveryUpdate(id: $0.id, state: .delivered, attempts: 1) }, at: Date())
        #expect(try await store.status(of: old.id)?.deliveries.map(\.state) == [.delivered])

        let again = Mutex<[String]>([])
        try await store.partition(.deliveries) { step in again.withLock { $0.append(step) } }
        #expect(again.withLock { $0 } == ["deliveries is already partitioned"])
        // The old table is dropped whole once every delivery in it is final and old enough.
        let legacyUpper = try #require(
            try await store.withConnection { try await Self.deliveries.partitions($0) }?.first { $0.name == Self.deliveries.legacyPartition }?.upper)
        let removed = try await store.purgeFinishedDeliveries(
            before: Date(timeIntervalSince1970: TimeInterval(legacyUpper)).addingTimeInterval(86_400), limit: 100_000)
        #expect(removed == after.count, "the old table and the months below the cutoff are dropped whole")
        #expect(!(try await store.partitionNames(of: .deliveries)).contains(Self.deliveries.legacyPartition))
        // The ids' sequence outlived the old table that owned it.
        try await Self.insertWithoutID(store, at: Date(), state: "delivered")
        #expect(try await Self.olderHeraldsNextID(store) != nil)
    }

    // MARK: Helpers

    /// A delivery with the id Herald would have drawn at `at`.
    static func insert(_ store: PostgresStore, at: Date, state: String, updated: Date) async throws {
        try await insert(
            store, id: Int64(at.timeIntervalSince1970) << DeliveryIDs.sequenceBits + Int64.random(in: 0..<1_000_000), state: state, updated: updated)
    }

    static func insert(_ store: PostgresStore, id: Int64, state: String, updated: Date) async throws {
        let pending = state == "pending" ? PostgresStore.micros(updated) : nil
        try await store.withConnection { session in
            try await session.execute(
                """
                INSERT INTO deliveries (id, notification_id, sink, user_id, distribution, state, attempts, next_attempt_at, updated_at)
                VALUES (\(id), 'n', 'fcm', 'u', 'alert', \(state), 1, \(pending), \(PostgresStore.micros(updated)))
                """
            )
        }
    }

    /// A delivery with the id the table gives.
    static func insertWithoutID(_ store: PostgresStore, at: Date, state: String) async throws {
        try await store.withConnection { session in
            try await session.execute(
                """
                INSERT INTO deliveries (notification_id, sink, user_id, distribution, state, attempts, updated_at)
                VALUES ('n', 'fcm', 'u', 'alert', \(state), 1, \(PostgresStore.micros(at)))
                """
            )
        }
    }

    /// The next id as an older Herald's accept draws it (before v23, from the identity).
    static func olderHeraldsNextID(_ store: PostgresStore) async throws -> Int64? {
        try await store.withConnection { session in
            try await session.row("SELECT nextval(pg_get_serial_sequence('deliveries', 'id')) AS id")?.optionalInteger("id")
        }
    }

    struct StoredDeliveryRow: Equatable, Sendable {
        var id: Int64
        var state: String
        var updatedAt: Int64
    }

    static func rowsByID(_ store: PostgresStore) async throws -> [StoredDeliveryRow] {
        try await store.withConnection { session in
            try await session.rows("SELECT id, state, updated_at FROM deliveries ORDER BY id").map {
                StoredDeliveryRow(id: try $0.integer("id"), state: try $0.text("state"), updatedAt: try $0.integer("updated_at"))
            }
        }
    }
}
