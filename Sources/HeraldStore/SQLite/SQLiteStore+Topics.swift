import Foundation
import GRDB
import HeraldCore

extension SQLiteStore {
    public func channels() async throws -> [Channel] {
        try await writer.read { db in
            try StoredRecords.hierarchy(
                channels: try Row.fetchAll(db, sql: "SELECT * FROM channels ORDER BY rowid"),
                areas: try Row.fetchAll(db, sql: "SELECT * FROM areas ORDER BY rowid"),
                subjects: try Row.fetchAll(db, sql: "SELECT * FROM subjects ORDER BY rowid")
            )
        }
    }

    public func createChannel(_ channel: Channel) async throws {
        try await writer.write { db in
            try db.execute(
                sql: "INSERT INTO channels (id, name, description, access) VALUES (?, ?, ?, ?)",
                arguments: [channel.id.hex, channel.name, channel.desc, try StoredJSON.encode(channel.access)]
            )
        }
    }

    public func createArea(_ area: Area, channelID: ObjectID) async throws -> Bool {
        try await writer.write { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM channels WHERE id = ?", arguments: [channelID.hex]) != nil else { return false }
            try db.execute(
                sql: "INSERT INTO areas (id, channel_id, name, description, access) VALUES (?, ?, ?, ?, ?)",
                arguments: [area.id.hex, channelID.hex, area.name, area.desc, try StoredJSON.encode(area.access)]
            )
            return true
        }
    }

    public func updateArea(channelID: ObjectID, areaID: ObjectID, _ fields: HierarchyFields) async throws -> Area? {
        try await writer.write { db in
            try db.execute(
                sql: "UPDATE areas SET name = COALESCE(?, name), description = COALESCE(?, description) WHERE id = ? AND channel_id = ?",
                arguments: [fields.name, fields.desc, areaID.hex, channelID.hex]
            )
            guard db.changesCount > 0, let row = try Row.fetchOne(db, sql: "SELECT * FROM areas WHERE id = ?", arguments: [areaID.hex]) else {
                return nil
            }
            let subjects = try Row.fetchAll(db, sql: "SELECT * FROM subjects WHERE area_id = ? ORDER BY rowid", arguments: [areaID.hex]).map(
                StoredRecords.subject)
            return try StoredRecords.area(row, subjects: subjects)
        }
    }

    public func deleteArea(channelID: ObjectID, areaID: ObjectID) async throws -> Bool {
        try await writer.write { db in
            try db.execute(sql: "DELETE FROM areas WHERE id = ? AND channel_id = ?", arguments: [areaID.hex, channelID.hex])
            guard db.changesCount > 0 else { return false }
            try db.execute(
                sql: "DELETE FROM subscriptions WHERE topic_key IN (SELECT topic_key FROM subjects WHERE area_id = ?)", arguments: [areaID.hex]
            )
            try db.execute(sql: "DELETE FROM subjects WHERE area_id = ?", arguments: [areaID.hex])
            return true
        }
    }

    public func createSubject(_ subject: Subject, channelID: ObjectID, areaID: ObjectID) async throws -> Bool {
        try await writer.write { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM areas WHERE id = ? AND channel_id = ?", arguments: [areaID.hex, channelID.hex]) != nil else {
                return false
            }
            try db.execute(
                sql: """
                    INSERT INTO subjects (id, channel_id, area_id, name, description, access, tags, topic_key, level, distribution)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    subject.id.hex, channelID.hex, areaID.hex, subject.name, subject.desc, try StoredJSON.encode(subject.access),
                    try StoredJSON.encode(subject.tags), subject.topicKey, subject.opt.level.rawValue, subject.opt.distribution.rawValue,
                ]
            )
            return true
        }
    }

    public func updateSubject(channelID: ObjectID, areaID: ObjectID, subjectID: ObjectID, _ fields: HierarchyFields) async throws -> Subject? {
        try await writer.write { db in
            try db.execute(
                sql: """
                    UPDATE subjects SET name = COALESCE(?, name), description = COALESCE(?, description),
                        level = COALESCE(?, level), distribution = COALESCE(?, distribution)
                    WHERE id = ? AND area_id = ? AND channel_id = ?
                    """,
                arguments: [fields.name, fields.desc, fields.opt?.level.rawValue, fields.opt?.distribution.rawValue, subjectID.hex, areaID.hex, channelID.hex]
            )
            guard db.changesCount > 0 else { return nil }
            return try Row.fetchOne(db, sql: "SELECT * FROM subjects WHERE id = ?", arguments: [subjectID.hex]).map(StoredRecords.subject)
        }
    }

    public func deleteSubject(channelID: ObjectID, areaID: ObjectID, subjectID: ObjectID) async throws -> Bool {
        try await writer.write { db in
            guard
                let topicKey = try String.fetchOne(
                    db, sql: "SELECT topic_key FROM subjects WHERE id = ? AND area_id = ? AND channel_id = ?",
                    arguments: [subjectID.hex, areaID.hex, channelID.hex]
                )
            else { return false }
            try db.execute(sql: "DELETE FROM subjects WHERE id = ?", arguments: [subjectID.hex])
            try db.execute(sql: "DELETE FROM subscriptions WHERE topic_key = ?", arguments: [topicKey])
            return true
        }
    }

    public func subject(topicKey: String) async throws -> SubjectEntry? {
        try await writer.read { db in
            try Row.fetchOne(db, sql: Self.entrySQL + " WHERE s.topic_key = ?", arguments: [topicKey]).map(StoredRecords.entry)
        }
    }

    public func subscriptions(userID: String) async throws -> [SubscriptionStatus] {
        try await writer.read { db in
            let subscribed = Set(try String.fetchAll(db, sql: "SELECT topic_key FROM subscriptions WHERE user_id = ?", arguments: [userID]))
            return try Row.fetchAll(db, sql: Self.entrySQL + " ORDER BY c.rowid, a.rowid, s.rowid").map { row in
                let entry = try StoredRecords.entry(row)
                return SubscriptionStatus(entry: entry, subscribed: entry.subject.opt.level == .forced || subscribed.contains(entry.subject.topicKey))
            }
        }
    }

    public func subscribe(userID: String, topicKey: String, at date: Date) async throws {
        try await groupCommitted { db in
            try Self.ensureUser(db, userID, at: Self.micros(date))
            try db.execute(
                sql: "INSERT OR IGNORE INTO subscriptions (user_id, topic_key, created_at) VALUES (?, ?, ?)", arguments: [userID, topicKey, Self.micros(date)]
            )
        }
    }

    public func unsubscribe(userID: String, topicKey: String) async throws {
        try await groupCommitted { db in
            try db.execute(sql: "DELETE FROM subscriptions WHERE user_id = ? AND topic_key = ?", arguments: [userID, topicKey])
        }
    }

    /// Makes sure the user has a row: Forced subjects reach every user Herald knows.
    static func ensureUser(_ db: Database, _ userID: String, at now: Int64) throws {
        try db.execute(sql: "INSERT INTO users (id, updated_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING", arguments: [userID, now])
    }

    /// At a user's first device registration, subscribes them to every Recommended subject.
    static func subscribeRecommendedOnce(_ db: Database, _ userID: String, at now: Int64) throws {
        try ensureUser(db, userID, at: now)
        try db.execute(sql: "UPDATE users SET recommended_at = ? WHERE id = ? AND recommended_at IS NULL", arguments: [now, userID])
        guard db.changesCount > 0 else { return }
        try db.execute(
            sql: "INSERT OR IGNORE INTO subscriptions (user_id, topic_key, created_at) SELECT ?, topic_key, ? FROM subjects WHERE level = ?",
            arguments: [userID, now, SubscriptionLevel.recommended.rawValue]
        )
    }

    static let entrySQL = """
        SELECT s.*, a.name AS area_name, c.name AS channel_name
        FROM subjects s JOIN areas a ON a.id = s.area_id JOIN channels c ON c.id = s.channel_id
        """
}
