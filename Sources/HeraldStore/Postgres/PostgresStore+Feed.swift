import Foundation
import HeraldCore
import PostgresNIO

extension PostgresStore {
    public func addFeedMessage(_ message: FeedMessage) async throws {
        let regions = try StoredJSON.encode(message.targetRegions)
        try await transaction { session in
            try await session.execute(
                """
                INSERT INTO feed_messages (id, title, body, url, posted_at, expires_at, priority, target_regions, target_version)
                VALUES (\(message.id.hex), \(message.title), \(message.body), \(message.url), \(Self.micros(message.postedAt)),
                    \(Self.micros(message.expiresAt)), \(message.priority), \(regions), \(message.targetVersion))
                ON CONFLICT (id) DO NOTHING
                """
            )
            try await session.notify(Self.feedChannel)
        }
    }

    public func deleteFeedMessage(id: ObjectID) async throws -> Bool {
        try await transaction { session in
            let deleted = try await session.count("DELETE FROM feed_messages WHERE id = \(id.hex) RETURNING id") > 0
            if deleted { try await session.notify(Self.feedChannel) }
            return deleted
        }
    }

    public func feedMessages() async throws -> [FeedMessage] {
        try await withConnection { session in
            try await session.rows("SELECT * FROM feed_messages ORDER BY posted_at, id").map(StoredRecords.feedMessage)
        }
    }

    public func purgeFeedMessages(expiredBefore date: Date) async throws -> Int {
        try await transaction { session in
            let purged = try await session.count("DELETE FROM feed_messages WHERE expires_at <= \(Self.micros(date)) RETURNING id")
            if purged > 0 { try await session.notify(Self.feedChannel) }
            return purged
        }
    }

    public func watchFeedChanges(_ changed: @escaping @Sendable () -> Void) async throws {
        try await listen(on: Self.feedChannel, changed)
    }
}
