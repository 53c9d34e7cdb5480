import HeraldCore

/// Frequency caps, `digest_key` windows and quiet hours that hold (docs/timing.md), the same on
/// both engines: a delivery that may fold is stored `held` with its mark (`fold`); the digest
/// worker counts each notification once per user and key in `fold_counters`, turns the first
/// `max` of a window `pending`, and folds the rest (`folded`) into `digest_items`, delivered
/// together when the window ends.
enum FoldingSQL {
    static let migration = [
        "ALTER TABLE notifications ADD COLUMN digest_key TEXT",
        "ALTER TABLE notifications ADD COLUMN digest_window BIGINT",
        "ALTER TABLE deliveries ADD COLUMN fold TEXT",
        "CREATE INDEX deliveries_held ON deliveries(id) WHERE state = 'held'",
        """
        CREATE TABLE fold_counters (
            user_id TEXT NOT NULL,
            fold_key TEXT NOT NULL,
            window_end BIGINT NOT NULL,
            count BIGINT NOT NULL,
            PRIMARY KEY (user_id, fold_key)
        )
        """,
        """
        CREATE TABLE digest_items (
            user_id TEXT NOT NULL,
            fold_key TEXT NOT NULL,
            due_at BIGINT NOT NULL,
            notification_id TEXT NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
            PRIMARY KEY (user_id, fold_key, notification_id)
        )
        """,
        "CREATE INDEX digest_items_due ON digest_items(due_at)",
        "CREATE INDEX digest_items_notification ON digest_items(notification_id)",
    ]

    /// Deliveries retention may purge (with `updated_at` old enough): finished ones, never one
    /// waiting for an attempt or a count, nor one folded into a digest not yet released. Its
    /// first term is `deliveries_finished_by_age`'s condition word for word: SQLite uses a
    /// partial index only for a query that repeats it (`NOT IN ('pending', …)` scanned the table).
    static let finishedDelivery = """
        state <> 'pending' AND state <> 'held' AND NOT (state = 'folded' AND EXISTS (
            SELECT 1 FROM digest_items d WHERE d.notification_id = deliveries.notification_id AND d.user_id = deliveries.user_id))
        """

    /// For retention's purge of notifications (`n`): none a recipient still waits for (a
    /// `send_at_local` instant) or a digest not yet released holds.
    static let stillWaiting = """
        NOT EXISTS (SELECT 1 FROM scheduled_recipients s WHERE s.notification_id = n.id)
                    AND NOT EXISTS (SELECT 1 FROM digest_items i WHERE i.notification_id = n.id)
        """

    /// Microseconds until the next digest is due (`until`), by `now`; NULL for none.
    static func untilNextDigest(now: String) -> String {
        "SELECT MIN(due_at) - \(now) AS until FROM digest_items"
    }
}

/// A held delivery as the digest worker reads it.
struct HeldDelivery {
    var id: Int64
    var notification: String
    var user: String
    var fold: String?

    init(_ row: some StoredRow) throws {
        id = try row.integer("id")
        notification = try row.text("notification_id")
        user = try row.text("user_id")
        fold = try row.optionalText("fold")
    }
}

/// One notification's held deliveries for one user under one mark: counted once.
struct HeldGroup {
    var notification: String
    var user: String
    /// nil for a mark that does not read (corrupt storage): the deliveries go out.
    var mark: FoldMark?
    var ids: [Int64]

    /// Groups `held` (read in id order) by notification, user and mark, in order of arrival.
    static func groups(_ held: [HeldDelivery]) -> [HeldGroup] {
        var order: [String] = []
        var groups: [String: HeldGroup] = [:]
        for delivery in held {
            let key = delivery.notification + "\u{0}" + delivery.user + "\u{0}" + (delivery.fold ?? "")
            if groups[key] == nil {
                order.append(key)
                groups[key] = HeldGroup(
                    notification: delivery.notification, user: delivery.user, mark: delivery.fold.flatMap { FoldMark(stored: $0) }, ids: [])
            }
            groups[key]?.ids.append(delivery.id)
        }
        return order.compactMap { groups[$0] }
    }
}

/// A user's count for one key: how many notifications the window that ends at `windowEnd` let
/// through.
struct FoldCounter: Equatable {
    var windowEnd: Int64
    var count: Int64

    /// The decision for one more notification at `now`: a window that has ended is replaced by
    /// one opened now. - Returns: whether it goes out, and the counter to store.
    static func decide(_ counter: FoldCounter?, mark: FoldMark, now: Int64) -> (goesOut: Bool, counter: FoldCounter) {
        var current = counter ?? FoldCounter(windowEnd: now, count: 0)
        if current.windowEnd <= now {
            current = FoldCounter(windowEnd: Timestamp.microseconds(mark.windowEnd(openedAt: Timestamp.date(microseconds: now))), count: 0)
        }
        guard current.count < Int64(mark.max) else { return (false, current) }
        current.count += 1
        return (true, current)
    }
}
