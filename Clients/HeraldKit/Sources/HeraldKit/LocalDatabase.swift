public import Foundation
import GRDB

/// The device's state, in one SQLite file the app chooses (docs/heraldkit.md "Local state"):
/// the session, the feed and its read receipts, the card pool and history, and the outbox of
/// reports and events not yet uploaded. Every write is a transaction, so a killed app finds
/// each change whole or not at all.
public final class LocalDatabase: Sendable {
    let queue: DatabaseQueue

    /// Opens (creating, then migrating) the database at `url`.
    public init(url: URL) throws(HeraldKitError) {
        do {
            var configuration = Configuration()
            configuration.busyMode = .timeout(5)
            queue = try DatabaseQueue(path: url.path, configuration: configuration)
            try Self.migrator.migrate(queue)
        } catch {
            throw .localStorage(String(describing: error))
        }
    }

    /// A database in memory, gone with the process: for previews and tests.
    public init() throws(HeraldKitError) {
        do {
            queue = try DatabaseQueue()
            try Self.migrator.migrate(queue)
        } catch {
            throw .localStorage(String(describing: error))
        }
    }

    /// Versioned: a migration, once shipped, is never edited; a change is a new one.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            // Small values: the session, the entity tags and cache keys, the stream's position.
            try db.execute(sql: "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            // The whole feed as index.json last answered it.
            try db.execute(
                sql: """
                    CREATE TABLE feed_message (
                        id TEXT PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL, url TEXT,
                        posted_at DOUBLE NOT NULL, expires_at DOUBLE NOT NULL, priority INTEGER NOT NULL,
                        target_regions TEXT NOT NULL, target_version TEXT)
                    """)
            // What the device has shown; never sent anywhere.
            try db.execute(sql: "CREATE TABLE feed_receipt (message_id TEXT PRIMARY KEY, read_at DOUBLE NOT NULL)")
            try db.execute(sql: "CREATE TABLE card (id TEXT PRIMARY KEY, metadata TEXT NOT NULL)")
            // Unseen cards and their scores; scored_at decides which of two scores wins.
            try db.execute(sql: "CREATE TABLE pool (card TEXT PRIMARY KEY, score DOUBLE NOT NULL, scored_at DOUBLE NOT NULL)")
            // Seen cards in the order seen; server_index is Herald's once it has the report.
            try db.execute(
                sql: """
                    CREATE TABLE card_history (
                        position INTEGER PRIMARY KEY AUTOINCREMENT, card TEXT NOT NULL UNIQUE, seen_at DOUBLE NOT NULL,
                        server_index TEXT)
                    """)
            // Reports and events waiting to be uploaded, deduplicated by their id.
            try db.execute(
                sql: """
                    CREATE TABLE outbox (
                        id TEXT PRIMARY KEY, kind TEXT NOT NULL, body TEXT NOT NULL, created_at DOUBLE NOT NULL,
                        attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at DOUBLE NOT NULL DEFAULT 0,
                        refused TEXT)
                    """)
            try db.execute(sql: "CREATE INDEX outbox_due ON outbox (kind, next_attempt_at) WHERE refused IS NULL")
        }
        return migrator
    }

    func read<T>(_ body: (Database) throws -> T) throws(HeraldKitError) -> T {
        do {
            return try queue.read(body)
        } catch {
            throw .localStorage(String(describing: error))
        }
    }

    func write<T>(_ body: (Database) throws -> T) throws(HeraldKitError) -> T {
        do {
            return try queue.write(body)
        } catch {
            throw .localStorage(String(describing: error))
        }
    }

    // MARK: Small values

    func value(_ key: String) throws(HeraldKitError) -> String? {
        try read { db in try Self.value(key, in: db) }
    }

    func setValue(_ value: String?, for key: String) throws(HeraldKitError) {
        try write { db in try Self.setValue(value, for: key, in: db) }
    }

    static func setValue(_ value: String?, for key: String, in db: Database) throws {
        if let value {
            try db.execute(sql: "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", arguments: [key, value])
        } else {
            try db.execute(sql: "DELETE FROM meta WHERE key = ?", arguments: [key])
        }
    }

    static func value(_ key: String, in db: Database) throws -> String? {
        try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [key])
    }
}
