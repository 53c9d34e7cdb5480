import Foundation

/// The notifications' purge reads ids up to its cutoff's second: an id begins with the second
/// it was made in (8 hex digits), so an index walk in id order stops there instead of reading
/// every newer notification to fill its batch.
enum NotificationRetention {
    /// True for a notification (`n`) that nothing refers to any more: no delivery, history
    /// row, unfinished fan-out, waiting recipient or unreleased digest. Both engines' SQL.
    static let unreferenced = """
        NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.notification_id = n.id)
                    AND NOT EXISTS (SELECT 1 FROM history h WHERE h.notification_id = n.id)
                    AND NOT EXISTS (SELECT 1 FROM fanout_jobs j WHERE j.notification_id = n.id AND j.done_at IS NULL)
                    AND \(FoldingSQL.stillWaiting)
        """

    /// The first id past every id made before the second after `micros` (microseconds since 1970).
    static func idBound(before micros: Int64) -> String {
        let second = UInt32(clamping: micros / 1_000_000 + 1)
        return String(format: "%08x", second)
    }
}
