import Foundation
import GRDB
import HeraldCore

extension SQLiteStore {
    public func foldHeld(limit: Int) async throws -> Int {
        try Self.checkFile(file)
        // Woken by every accept: nothing held (the usual case) costs a read, not the write lock.
        let held = try await writer.read { db in
            try Bool.fetchOne(try db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM deliveries WHERE state = 'held')"))
        }
        guard held == true else { return 0 }
        return try await writer.write { db -> Int in
            let notifications = try String.fetchAll(
                db, sql: "SELECT notification_id FROM deliveries WHERE state = 'held' GROUP BY notification_id ORDER BY MIN(id) LIMIT ?",
                arguments: [max(limit, 1)])
            guard !notifications.isEmpty else { return 0 }
            let held = try Row.fetchAll(
                db,
                sql: """
                    SELECT id, notification_id, user_id, fold FROM deliveries
                    WHERE state = 'held' AND notification_id IN (SELECT value FROM json_each(?)) ORDER BY id
                    """,
                arguments: [try StoredJSON.encode(notifications)]
            ).map(HeldDelivery.init)
            let now = Self.micros(Date())
            for group in HeldGroup.groups(held) {
                let ids = try StoredJSON.encode(group.ids)
                guard let mark = group.mark else {
                    try db.execute(
                        sql: "UPDATE deliveries SET state = 'pending', next_attempt_at = ?, updated_at = ? WHERE id IN (SELECT value FROM json_each(?))",
                        arguments: [now, now, ids])
                    continue
                }
                let stored = try Row.fetchOne(
                    db, sql: "SELECT window_end, count FROM fold_counters WHERE user_id = ? AND fold_key = ?", arguments: [group.user, mark.key]
                ).map { FoldCounter(windowEnd: try $0.integer("window_end"), count: try $0.integer("count")) }
                let (goesOut, counter) = FoldCounter.decide(stored, mark: mark, now: now)
                try db.execute(
                    sql: """
                        INSERT INTO fold_counters (user_id, fold_key, window_end, count) VALUES (?, ?, ?, ?)
                        ON CONFLICT (user_id, fold_key) DO UPDATE SET window_end = excluded.window_end, count = excluded.count
                        """,
                    arguments: [group.user, mark.key, counter.windowEnd, counter.count])
                try db.execute(
                    sql: "UPDATE deliveries SET state = ?, next_attempt_at = ?, updated_at = ? WHERE id IN (SELECT value FROM json_each(?))",
                    arguments: [goesOut ? DeliveryState.pending.rawValue : DeliveryState.folded.rawValue, goesOut ? now : nil, now, ids])
                if !goesOut {
                    try db.execute(
                        sql: "INSERT OR IGNORE INTO digest_items (user_id, fold_key, due_at, notification_id) VALUES (?, ?, ?, ?)",
                        arguments: [group.user, mark.key, counter.windowEnd, group.notification])
                }
            }
            return notifications.count
        }
    }

    public func untilNextDigest() async throws -> Duration? {
        let until = try await writer.read { db in
            try Int64.fetchOne(try db.cachedStatement(sql: FoldingSQL.untilNextDigest(now: "?")), arguments: [Self.micros(Date())])
        }
        return until.map { .microseconds(max($0, 0)) }
    }

    public func releaseDueDigests(limit: Int, compose: @escaping @Sendable (DueDigest, RecipientContext) -> ComposedDigest) async throws -> Int {
        try Self.checkFile(file)
        let due = try await writer.read { db in
            try Bool.fetchOne(
                try db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM digest_items WHERE due_at <= ?)"), arguments: [Self.micros(Date())])
        }
        guard due == true else { return 0 }
        return try await writer.write { [modules] db -> Int in
            let now = Self.micros(Date())
            let due = try Row.fetchAll(
                db,
                sql: "SELECT user_id, fold_key, due_at FROM digest_items WHERE due_at <= ? GROUP BY user_id, fold_key, due_at ORDER BY due_at LIMIT ?",
                arguments: [now, max(limit, 1)])
            for digest in due {
                let (user, key, dueAt) = (try digest.text("user_id"), try digest.text("fold_key"), try digest.integer("due_at"))
                let items = try Row.fetchAll(
                    db,
                    sql: """
                        SELECT n.* FROM digest_items d JOIN notifications n ON n.id = d.notification_id
                        WHERE d.user_id = ? AND d.fold_key = ? AND d.due_at = ? ORDER BY n.timestamp, n.id
                        """,
                    arguments: [user, key, dueAt]
                ).map(StoredRecords.notification)
                try db.execute(sql: "DELETE FROM digest_items WHERE user_id = ? AND fold_key = ? AND due_at = ?", arguments: [user, key, dueAt])
                if items.count == 1, let only = items.first {
                    // One item: it goes out as itself.
                    try db.execute(
                        sql: """
                            UPDATE deliveries SET state = 'pending', next_attempt_at = ?, updated_at = ?
                            WHERE notification_id = ? AND user_id = ? AND state = 'folded'
                            """,
                        arguments: [now, now, only.id.hex, user])
                } else if !items.isEmpty {
                    let recipient = try Self.recipients(db, userIDs: [user]).first ?? RecipientContext(userID: user)
                    let composed = compose(DueDigest(userID: user, key: key, dueAt: Timestamp.date(microseconds: dueAt), items: items), recipient)
                    _ = try Self.insert(composed.notification, recipients: 1, db, idempotency: nil, since: Date())
                    try Self.insert(composed.deliveries, of: composed.notification.id, db, at: now, modules: modules)
                }
            }
            return due.count
        }
    }
}
