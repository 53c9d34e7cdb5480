public import Foundation
public import HeraldCore
public import HeraldStore

/// ``FeedStore`` on either engine, each statement written once (``SharedStatement``): the
/// `feed_messages` table both engines' migrations created. A change is announced as
/// ``StoreChange/feed``, so every process (PostgreSQL) reloads its snapshot (``FeedMaintenance``).
public struct SharedFeedStore: FeedStore {
    let database: any SharedSQLDatabase & ChangeStore

    public init(database: any SharedSQLDatabase & ChangeStore) {
        self.database = database
    }

    public func addFeedMessage(_ message: FeedMessage) async throws {
        _ = try await database.transaction(
            [
                SharedStatement(
                    """
                    INSERT INTO feed_messages (id, title, body, url, posted_at, expires_at, priority, target_regions, target_version)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING
                    """, .text(message.id.hex), .text(message.title), .text(message.body), .text(message.url),
                    .integer(Timestamp.microseconds(message.postedAt)), .integer(Timestamp.microseconds(message.expiresAt)),
                    .integer(Int64(message.priority)), .text(try StoredJSON.encode(message.targetRegions)), .text(message.targetVersion))
            ], announcing: .feed)
    }

    public func deleteFeedMessage(id: ObjectID) async throws -> Bool {
        let deleted = try await database.transaction([SharedStatement("DELETE FROM feed_messages WHERE id = $1 RETURNING id", .text(id.hex))])
        if !deleted.isEmpty { try await announce() }
        return !deleted.isEmpty
    }

    public func feedMessages() async throws -> [FeedMessage] {
        try await database.rows(SharedStatement("SELECT * FROM feed_messages ORDER BY posted_at, id")).map(StoredRecords.feedMessage)
    }

    public func purgeFeedMessages(expiredBefore date: Date) async throws -> Int {
        let purged = try await database.transaction(
            [SharedStatement("DELETE FROM feed_messages WHERE expires_at <= $1 RETURNING id", .integer(Timestamp.microseconds(date)))]
        ).count
        if purged > 0 { try await announce() }
        return purged
    }

    /// Every process's snapshot reloads on any change, its own included (a reload is one read).
    public func watchFeedChanges(_ changed: @escaping @Sendable () -> Void) async throws {
        try await database.watchChanges { change in
            if change == .feed { changed() }
        }
    }

    /// Tells every process the feed changed: after the commit, since nothing is announced for
    /// a delete that removed nothing, and a reload that runs early only reads the old rows.
    private func announce() async throws {
        _ = try await database.results(of: [], announcing: .feed)
    }
}
