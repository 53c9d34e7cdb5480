import Foundation
import GRDB
import HeraldCore
import HeraldStore

/// Databases written straight through the store, so accepts do not pace what is measured on them.
enum Backlog {
    /// A fresh database holding `notifications` accepted notifications, each with a push to one
    /// of `users` devices and a history row, all due now.
    static func prepare(database: String, notifications: Int, users: Int) async throws {
        let (store, devices) = try await devicesDatabase(database, users: users)
        let ids = ObjectIDGenerator()
        let now = Date()
        try await inParallel(notifications) { index in
            let device = devices[index % devices.count]
            let notification = HeraldNotification(
                id: ids.next(at: now), type: "comment", title: "Bench \(index)", body: "b", url: nil, data: [:], timestamp: now,
                target: .users([device.userID])
            )
            let deliveries = [
                PlannedDelivery(sink: "history", userID: device.userID, distribution: .alert),
                PlannedDelivery(sink: "fcm", userID: device.userID, deviceID: device.id, distribution: .alert),
            ]
            _ = try await store.accept(notification, recipients: 1, deliveries: deliveries, idempotencySince: now)
        }
    }

    /// A fresh database holding `notifications` scheduled sends (`send_at`), each for one of
    /// `users` users with one device, all due at one instant a year away; ``reschedule(_:at:)``
    /// brings that instant to when the benchmark wants it, once the writing (minutes for a
    /// million) is over.
    static func prepareScheduled(database: String, notifications: Int, users: Int, progress: @escaping @Sendable (Int) -> Void) async throws {
        let (store, devices) = try await devicesDatabase(database, users: users)
        let ids = ObjectIDGenerator()
        let now = Date()
        let sendAt = now.addingTimeInterval(360 * 86_400)
        try await inParallel(notifications) { index in
            var notification = HeraldNotification(
                id: ids.next(at: now), type: "comment", title: "Scheduled \(index)", body: "b", url: nil, data: [:], timestamp: now,
                target: .users([devices[index % devices.count].userID])
            )
            notification.sendAt = sendAt
            _ = try await store.acceptScheduled(
                notification, recipients: .users([devices[index % devices.count].userID]), dueAt: sendAt, idempotency: nil, idempotencySince: now)
            if (index + 1) % 100_000 == 0 { progress(index + 1) }
        }
    }

    /// Moves every scheduled send in `database` to `instant` (Herald not running on it).
    static func reschedule(_ database: String, at instant: Date) async throws {
        let micros = Int64((instant.timeIntervalSince1970 * 1e6).rounded())
        let queue = try DatabaseQueue(path: database)
        try await queue.write { db in
            try db.execute(sql: "UPDATE fanout_jobs SET due_at = ? WHERE due_at IS NOT NULL", arguments: [micros])
            try db.execute(sql: "UPDATE notifications SET send_at = ? WHERE send_at IS NOT NULL", arguments: [micros])
        }
    }

    /// A fresh database with `users` users, each a settings `timezone` of one of the 24 `zones`
    /// in turn (the first 24 saved through the store, the rest copied from them in one statement:
    /// saving a million through the API would take longer than the benchmark).
    static func prepareZonedUsers(database: String, users: Int, zones: [String]) async throws {
        let store = try SQLiteStore(path: database)
        try await store.migrate()
        for (index, zone) in zones.enumerated() {
            _ = try await store.updateSettings(userID: "zone-template-\(index)") { $0.timezone = zone }
        }
        let queue = try DatabaseQueue(path: database)
        try await queue.write { db in
            let copies = "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?) "
            let templates = "FROM n JOIN users t ON t.id = 'zone-template-' || (i % ?)"
            let arguments: StatementArguments = [max(users - zones.count, 0), zones.count]
            try db.execute(
                sql: copies + "INSERT INTO users (id, settings, updated_at) SELECT 'zoned-user-' || i, t.settings, t.updated_at " + templates,
                arguments: arguments)
            try db.execute(
                sql: copies + "INSERT INTO settings_versions (user_id, saved_at, settings) SELECT 'zoned-user-' || i, t.updated_at, t.settings " + templates,
                arguments: arguments)
        }
    }

    /// `users` users `bench-user-N`, each with one FCM device `bench-token-N`.
    private static func devicesDatabase(_ database: String, users: Int) async throws -> (SQLiteStore, [Device]) {
        let store = try SQLiteStore(path: database)
        try await store.migrate()
        let ids = ObjectIDGenerator()
        var devices: [Device] = []
        for index in 0..<users {
            devices.append(
                try await store.registerDevice(
                    userID: "bench-user-\(index)", registration: .token("bench-token-\(index)", provider: "fcm"), newID: ids.next(), at: Date()
                )
            )
        }
        return (store, devices)
    }

    /// Calls `write` for every index below `count`, 16 at a time (SQLite groups their commits).
    private static func inParallel(_ count: Int, _ write: @escaping @Sendable (Int) async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<16 {
                group.addTask {
                    for index in stride(from: worker, to: count, by: 16) { try await write(index) }
                }
            }
            try await group.waitForAll()
        }
    }
}
