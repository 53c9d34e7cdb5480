import GRDB
import HeraldCore

extension SQLiteStore {
    /// At a user's first device registration, subscribes them to every Recommended subject
    /// (docs/topics.md): in the registration's transaction, so the two are one fact.
    static func subscribeRecommendedOnce(_ db: Database, _ userID: String, at now: Int64) throws {
        // The user's row first: Forced subjects reach every user Herald knows.
        try db.execute(sql: "INSERT INTO users (id, updated_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING", arguments: [userID, now])
        try db.execute(sql: "UPDATE users SET recommended_at = ? WHERE id = ? AND recommended_at IS NULL", arguments: [now, userID])
        guard db.changesCount > 0 else { return }
        try db.execute(
            sql: "INSERT OR IGNORE INTO subscriptions (user_id, topic_key, created_at) SELECT ?, topic_key, ? FROM subjects WHERE level = ?",
            arguments: [userID, now, SubscriptionLevel.recommended.rawValue]
        )
    }
}
