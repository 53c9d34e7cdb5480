public import Foundation
public import HeraldCore
public import HeraldStore

/// ``TopicStore`` on either engine, each statement written once (``SharedStatement``): the
/// `channels`, `areas`, `subjects` and `subscriptions` tables both engines' first migrations
/// created. Creation order is the engine's insertion order (``SharedSQLDatabase/insertionOrder``).
public struct SharedTopicStore: TopicStore {
    let database: any SharedSQLDatabase

    public init(database: any SharedSQLDatabase) {
        self.database = database
    }

    public func channels() async throws -> [Channel] {
        let order = database.insertionOrder
        let tables = try await database.rows(of: [
            SharedStatement("SELECT * FROM channels ORDER BY \(order)"),
            SharedStatement("SELECT * FROM areas ORDER BY \(order)"),
            SharedStatement("SELECT * FROM subjects ORDER BY \(order)"),
        ])
        guard tables.count == 3 else { throw HeraldError(.internal, code: "storage_failed", "the hierarchy's three reads answered \(tables.count)") }
        return try StoredRecords.hierarchy(channels: tables[0], areas: tables[1], subjects: tables[2])
    }

    public func createChannel(_ channel: Channel) async throws {
        _ = try await database.transaction([
            SharedStatement(
                "INSERT INTO channels (id, name, description, access) VALUES ($1, $2, $3, $4)", .text(channel.id.hex), .text(channel.name),
                .text(channel.desc), .text(try StoredJSON.encode(channel.access)))
        ])
    }

    public func createArea(_ area: Area, channelID: ObjectID) async throws -> Bool {
        try await !database.transaction([
            SharedStatement(
                """
                INSERT INTO areas (id, channel_id, name, description, access)
                SELECT $1, id, $2, $3, $4 FROM channels WHERE id = $5
                RETURNING id
                """, .text(area.id.hex), .text(area.name), .text(area.desc), .text(try StoredJSON.encode(area.access)), .text(channelID.hex))
        ]).isEmpty
    }

    public func updateArea(channelID: ObjectID, areaID: ObjectID, _ fields: HierarchyFields) async throws -> Area? {
        let results = try await database.results(
            of: [
                SharedStatement(
                    "UPDATE areas SET name = COALESCE($1, name), description = COALESCE($2, description) WHERE id = $3 AND channel_id = $4 RETURNING *",
                    .text(fields.name), .text(fields.desc), .text(areaID.hex), .text(channelID.hex)),
                SharedStatement(
                    "SELECT * FROM subjects WHERE area_id = $1 AND channel_id = $2 ORDER BY \(database.insertionOrder)", .text(areaID.hex),
                    .text(channelID.hex)),
            ], announcing: nil)
        guard results.count == 2, let area = results[0].first else { return nil }
        return try StoredRecords.area(area, subjects: try results[1].map(StoredRecords.subject))
    }

    /// The area's row goes first, so a subject being created in it concurrently either lands
    /// before (and goes with the rest) or finds no area.
    public func deleteArea(channelID: ObjectID, areaID: ObjectID) async throws -> Bool {
        let inArea: [SharedStatement.Value] = [.text(areaID.hex), .text(channelID.hex)]
        let results = try await database.results(
            of: [
                SharedStatement("DELETE FROM areas WHERE id = $1 AND channel_id = $2 RETURNING id", values: inArea),
                SharedStatement(
                    "DELETE FROM subscriptions WHERE topic_key IN (SELECT topic_key FROM subjects WHERE area_id = $1 AND channel_id = $2)", values: inArea),
                SharedStatement("DELETE FROM subjects WHERE area_id = $1 AND channel_id = $2", values: inArea),
            ], announcing: nil)
        return results.first?.isEmpty == false
    }

    public func createSubject(_ subject: Subject, channelID: ObjectID, areaID: ObjectID) async throws -> Bool {
        try await !database.transaction([
            SharedStatement(
                """
                INSERT INTO subjects (id, channel_id, area_id, name, description, access, tags, topic_key, level, distribution)
                SELECT $1, channel_id, id, $2, $3, $4, $5, $6, $7, $8 FROM areas WHERE id = $9 AND channel_id = $10
                RETURNING id
                """, .text(subject.id.hex), .text(subject.name), .text(subject.desc), .text(try StoredJSON.encode(subject.access)),
                .text(try StoredJSON.encode(subject.tags)), .text(subject.topicKey), .text(subject.opt.level.rawValue),
                .text(subject.opt.distribution.rawValue), .text(areaID.hex), .text(channelID.hex))
        ]).isEmpty
    }

    public func updateSubject(channelID: ObjectID, areaID: ObjectID, subjectID: ObjectID, _ fields: HierarchyFields) async throws -> Subject? {
        try await database.transaction([
            SharedStatement(
                """
                UPDATE subjects SET name = COALESCE($1, name), description = COALESCE($2, description),
                    level = COALESCE($3, level), distribution = COALESCE($4, distribution)
                WHERE id = $5 AND area_id = $6 AND channel_id = $7
                RETURNING *
                """, .text(fields.name), .text(fields.desc), .text(fields.opt?.level.rawValue), .text(fields.opt?.distribution.rawValue),
                .text(subjectID.hex), .text(areaID.hex), .text(channelID.hex))
        ]).first.map(StoredRecords.subject)
    }

    public func deleteSubject(channelID: ObjectID, areaID: ObjectID, subjectID: ObjectID) async throws -> Bool {
        let subject: [SharedStatement.Value] = [.text(subjectID.hex), .text(areaID.hex), .text(channelID.hex)]
        return try await !database.transaction([
            SharedStatement(
                "DELETE FROM subscriptions WHERE topic_key IN (SELECT topic_key FROM subjects WHERE id = $1 AND area_id = $2 AND channel_id = $3)",
                values: subject),
            SharedStatement("DELETE FROM subjects WHERE id = $1 AND area_id = $2 AND channel_id = $3 RETURNING id", values: subject),
        ]).isEmpty
    }

    public func subject(topicKey: String) async throws -> SubjectEntry? {
        try await TopicLookupSQL.subject(topicKey: topicKey, in: database)
    }

    public func isSubscribed(userID: String, topicKey: String) async throws -> Bool {
        try await TopicLookupSQL.isSubscribed(userID: userID, topicKey: topicKey, in: database)
    }

    public func subscriptions(userID: String) async throws -> [SubscriptionStatus] {
        let order = database.insertionOrder
        return try await database.rows(
            SharedStatement(
                """
                SELECT s.*, a.name AS area_name, c.name AS channel_name, sub.user_id AS subscriber
                FROM subjects s JOIN areas a ON a.id = s.area_id JOIN channels c ON c.id = s.channel_id
                LEFT JOIN subscriptions sub ON sub.topic_key = s.topic_key AND sub.user_id = $1
                ORDER BY c.\(order), a.\(order), s.\(order)
                """, .text(userID))
        ).map { row in
            let entry = try StoredRecords.entry(row)
            let stored = try row.optionalText("subscriber") != nil
            return SubscriptionStatus(entry: entry, subscribed: entry.subject.opt.level == .forced || stored)
        }
    }

    /// The user gets a row too: Forced subjects reach every user Herald knows.
    public func subscribe(userID: String, topicKey: String, at date: Date) async throws {
        let now = Timestamp.microseconds(date)
        _ = try await database.transaction([
            SharedStatement("INSERT INTO users (id, updated_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING", .text(userID), .integer(now)),
            SharedStatement(
                "INSERT INTO subscriptions (user_id, topic_key, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", .text(userID), .text(topicKey),
                .integer(now)),
        ])
    }

    public func unsubscribe(userID: String, topicKey: String) async throws {
        _ = try await database.transaction([
            SharedStatement("DELETE FROM subscriptions WHERE user_id = $1 AND topic_key = $2", .text(userID), .text(topicKey))
        ])
    }
}
