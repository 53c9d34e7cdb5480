import Foundation
import GRDB
import HeraldCore

extension SQLiteStore {
    public func addFeedMessage(_ message: FeedMessage) async throws {
        try await writer.write { db in
            try db.execute(
                sql: """
                    INSERT OR IGNORE INTO feed_messages (id, title, body, url, posted_at, expires_at, priority, target_regions, target_version)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    message.id.hex, message.title, message.body, message.url, Self.micros(message.postedAt), Self.micros(message.expiresAt),
                    message.priority, try StoredJSON.encode(message.targetRegions), message.targetVersion,
                ]
            )
        }
    }

    public func deleteFeedMessage(id: ObjectID) async throws -> Bool {
        try await writer.write { db in
            try db.execute(sql: "DELETE FROM feed_messages WHERE id = ?", arguments: [id.hex])
            return db.changesCount > 0
        }
    }

    public func feedMessages() async throws -> [FeedMessage] {
        try await writer.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM feed_messages ORDER BY posted_at, id").map(StoredRecords.feedMessage)
        }
    }

    public func purgeFeedMessages(expiredBefore date: Date) async throws -> Int {
        try await writer.write { db in
            try db.execute(sql: "DELETE FROM feed_messages WHERE expires_at <= ?", arguments: [Self.micros(date)])
            return db.changesCount
        }
    }
}
