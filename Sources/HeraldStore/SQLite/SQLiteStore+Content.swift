import Foundation
import GRDB
import HeraldCore

extension SQLiteStore {
    public func setPendingContent(_ items: [ContentItem]) async throws {
        let text = try StoredJSON.encode(items)
        try await writer.write { db in
            try db.execute(sql: "UPDATE content_sets SET items = ? WHERE name = 'pending'", arguments: [text])
        }
    }

    public func pendingContent() async throws -> ContentSet {
        try await writer.read { db in try Self.contentSet(db, "pending") }
    }

    public func publishedContent() async throws -> ContentSet {
        try await writer.read { db in try Self.contentSet(db, "published") }
    }

    public func publishContent(at milliseconds: Int64) async throws -> ContentSet {
        defer { changes.send(.content) }
        return try await writer.write { db in
            // One statement: readers of the published row see the old set or the new one.
            try db.execute(
                sql: """
                    UPDATE content_sets SET items = (SELECT items FROM content_sets WHERE name = 'pending'), last_published_at = ?
                    WHERE name = 'published'
                    """,
                arguments: [milliseconds]
            )
            try db.execute(sql: "UPDATE content_sets SET last_published_at = ? WHERE name = 'pending'", arguments: [milliseconds])
            return try Self.contentSet(db, "published")
        }
    }

    public func revertContent() async throws -> ContentSet {
        try await writer.write { db in
            try db.execute(
                sql: """
                    UPDATE content_sets SET items = (SELECT items FROM content_sets WHERE name = 'published'),
                        last_published_at = (SELECT last_published_at FROM content_sets WHERE name = 'published')
                    WHERE name = 'pending'
                    """
            )
            return try Self.contentSet(db, "pending")
        }
    }

    static func contentSet(_ db: Database, _ name: String) throws -> ContentSet {
        guard let row = try Row.fetchOne(db, sql: "SELECT items, last_published_at FROM content_sets WHERE name = ?", arguments: [name]) else {
            return ContentSet(items: [], lastPublishedAt: nil)
        }
        return try StoredRecords.contentSet(items: row.decode(forColumn: "items"), lastPublishedAt: row.decode(forColumn: "last_published_at"))
    }
}
