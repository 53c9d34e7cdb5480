import Foundation
import HeraldCore
import PostgresNIO

extension PostgresStore {
    public func setPendingContent(_ items: [ContentItem]) async throws {
        let text = try StoredJSON.encode(items)
        try await withConnection { session in
            try await session.execute("UPDATE content_sets SET items = \(text) WHERE name = 'pending'")
        }
    }

    public func pendingContent() async throws -> ContentSet {
        try await withConnection { session in try await Self.contentSet(session, "pending") }
    }

    public func publishedContent() async throws -> ContentSet {
        try await withConnection { session in try await Self.contentSet(session, "published") }
    }

    public func publishContent(at milliseconds: Int64) async throws -> ContentSet {
        try await transaction { session in
            // One statement: readers of the published row see the old set or the new one.
            try await session.execute(
                """
                UPDATE content_sets SET items = (SELECT items FROM content_sets WHERE name = 'pending'), last_published_at = \(milliseconds)
                WHERE name = 'published'
                """
            )
            try await session.execute("UPDATE content_sets SET last_published_at = \(milliseconds) WHERE name = 'pending'")
            try await session.announce(.content)
            return try await Self.contentSet(session, "published")
        }
    }

    public func revertContent() async throws -> ContentSet {
        try await transaction { session in
            try await session.execute(
                """
                UPDATE content_sets SET items = published.items, last_published_at = published.last_published_at
                FROM (SELECT items, last_published_at FROM content_sets WHERE name = 'published') AS published
                WHERE name = 'pending'
                """
            )
            return try await Self.contentSet(session, "pending")
        }
    }

    static func contentSet(_ session: PostgresSession, _ name: String) async throws -> ContentSet {
        guard let row = try await session.row("SELECT items, last_published_at FROM content_sets WHERE name = \(name)") else {
            return ContentSet(items: [], lastPublishedAt: nil)
        }
        return try StoredRecords.contentSet(items: try row.optionalText("items"), lastPublishedAt: try row.optionalInteger("last_published_at"))
    }
}
