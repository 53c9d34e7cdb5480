import HeraldCore
public import HeraldStore

/// ``ContentStore`` on either engine, each statement written once (``SharedStatement``): the
/// `content_sets` table both engines' first migrations created, one row per set.
public struct SharedContentStore: ContentStore {
    let database: any SharedSQLDatabase

    public init(database: any SharedSQLDatabase) {
        self.database = database
    }

    static let select = "SELECT items, last_published_at FROM content_sets WHERE name = $1"

    public func setPendingContent(_ items: [ContentItem]) async throws {
        _ = try await database.transaction([SharedStatement("UPDATE content_sets SET items = $1 WHERE name = 'pending'", .text(try StoredJSON.encode(items)))])
    }

    public func pendingContent() async throws -> ContentSet {
        try Self.set(try await database.rows(SharedStatement(Self.select, .text("pending"))))
    }

    public func publishedContent() async throws -> ContentSet {
        try Self.set(try await database.rows(SharedStatement(Self.select, .text("published"))))
    }

    public func publishContent(at milliseconds: Int64) async throws -> ContentSet {
        // One statement: readers of the published row see the old set or the new one.
        let rows = try await database.transaction(
            [
                SharedStatement(
                    """
                    UPDATE content_sets SET items = (SELECT items FROM content_sets WHERE name = 'pending'), last_published_at = $1
                    WHERE name = 'published'
                    """, .integer(milliseconds)),
                SharedStatement("UPDATE content_sets SET last_published_at = $1 WHERE name = 'pending'", .integer(milliseconds)),
                SharedStatement(Self.select, .text("published")),
            ], announcing: .content)
        return try Self.set(rows)
    }

    public func revertContent() async throws -> ContentSet {
        let rows = try await database.transaction([
            SharedStatement(
                """
                UPDATE content_sets SET items = (SELECT items FROM content_sets WHERE name = 'published'),
                    last_published_at = (SELECT last_published_at FROM content_sets WHERE name = 'published')
                WHERE name = 'pending'
                """),
            SharedStatement(Self.select, .text("pending")),
        ])
        return try Self.set(rows)
    }

    /// A set from its row; a missing row is an empty set, never published.
    static func set(_ rows: [SharedRow]) throws -> ContentSet {
        guard let row = rows.first else { return ContentSet(items: [], lastPublishedAt: nil) }
        return ContentSet(items: try row.json([ContentItem].self, "items") ?? [], lastPublishedAt: try row.optionalInteger("last_published_at"))
    }
}
