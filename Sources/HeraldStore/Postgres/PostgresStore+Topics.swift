import Foundation
import HeraldCore
import PostgresNIO

extension PostgresStore {
    public func channels() async throws -> [HeraldCore.Channel] {
        try await transaction { session in
            // One snapshot for the three reads (REPEATABLE READ would be stricter; creation
            // order makes a torn read harmless: a new area or subject just shows up next time).
            try StoredRecords.hierarchy(
                channels: try await session.rows("SELECT * FROM channels ORDER BY seq"),
                areas: try await session.rows("SELECT * FROM areas ORDER BY seq"),
                subjects: try await session.rows("SELECT * FROM subjects ORDER BY seq")
            )
        }
    }

    public func createChannel(_ channel: HeraldCore.Channel) async throws {
        let access = try StoredJSON.encode(channel.access)
        try await withConnection { session in
            try await session.execute(
                "INSERT INTO channels (id, name, description, access) VALUES (\(channel.id.hex), \(channel.name), \(channel.desc), \(access))"
            )
        }
    }

    public func createArea(_ area: Area, channelID: ObjectID) async throws -> Bool {
        let access = try StoredJSON.encode(area.access)
        return try await withConnection { session in
            try await session.count(
                """
                INSERT INTO areas (id, channel_id, name, description, access)
                SELECT \(area.id.hex), id, \(area.name), \(area.desc), \(access) FROM channels WHERE id = \(channelID.hex)
                RETURNING id
                """
            ) > 0
        }
    }

    public func updateArea(channelID: ObjectID, areaID: ObjectID, _ fields: HierarchyFields) async throws -> Area? {
        try await transaction { session in
            guard
                let row = try await session.row(
                    """
                    UPDATE areas SET name = COALESCE(\(fields.name), name), description = COALESCE(\(fields.desc), description)
                    WHERE id = \(areaID.hex) AND channel_id = \(channelID.hex)
                    RETURNING *
                    """
                )
            else { return nil }
            let subjects = try await session.rows("SELECT * FROM subjects WHERE area_id = \(areaID.hex) ORDER BY seq").map(StoredRecords.subject)
            return try StoredRecords.area(row, subjects: subjects)
        }
    }

    public func deleteArea(channelID: ObjectID, areaID: ObjectID) async throws -> Bool {
        try await transaction { session in
            guard try await session.count("DELETE FROM areas WHERE id = \(areaID.hex) AND channel_id = \(channelID.hex) RETURNING id") > 0 else {
                return false
            }
            try await session.execute(
                "DELETE FROM subscriptions WHERE topic_key IN (SELECT topic_key FROM subjects WHERE area_id = \(areaID.hex))"
            )
            try await session.execute("DELETE FROM subjects WHERE area_id = \(areaID.hex)")
            return true
        }
    }

    public func createSubject(_ subject: Subject, channelID: ObjectID, areaID: ObjectID) async throws -> Bool {
        let access = try StoredJSON.encode(subject.access)
        let tags = try StoredJSON.encode(subject.tags)
        return try await withConnection { session in
            try await session.count(
                """
                INSERT INTO subjects (id, channel_id, area_id, name, description, access, tags, topic_key, level, distribution)
                SELECT \(subject.id.hex), channel_id, id, \(subject.name), \(subject.desc), \(access), \(tags), \(subject.topicKey),
                    \(subject.opt.level.rawValue), \(subject.opt.distribution.rawValue)
                FROM areas WHERE id = \(areaID.hex) AND channel_id = \(channelID.hex)
                RETURNING id
                """
            ) > 0
        }
    }

    public func updateSubject(channelID: ObjectID, areaID: ObjectID, subjectID: ObjectID, _ fields: HierarchyFields) async throws -> Subject? {
        try await withConnection { session in
            try await session.row(
                """
                UPDATE subjects SET name = COALESCE(\(fields.name), name), description = COALESCE(\(fields.desc), description),
                    level = COALESCE(\(fields.opt?.level.rawValue), level), distribution = COALESCE(\(fields.opt?.distribution.rawValue), distribution)
                WHERE id = \(subjectID.hex) AND area_id = \(areaID.hex) AND channel_id = \(channelID.hex)
                RETURNING *
                """
            ).map(StoredRecords.subject)
        }
    }

    public func deleteSubject(channelID: ObjectID, areaID: ObjectID, subjectID: ObjectID) async throws -> Bool {
        try await transaction { session in
            guard
                let row = try await session.row(
                    "DELETE FROM subjects WHERE id = \(subjectID.hex) AND area_id = \(areaID.hex) AND channel_id = \(channelID.hex) RETURNING topic_key"
                )
            else { return false }
            try await session.execute("DELETE FROM subscriptions WHERE topic_key = \(try row.text("topic_key"))")
            return true
        }
    }

    public func subject(topicKey: String) async throws -> SubjectEntry? {
        try await withConnection { session in
            try await session.row(PostgresQuery(unsafeSQL: Self.entrySQL + " WHERE s.topic_key = $1", binds: Self.binds(topicKey))).map(StoredRecords.entry)
        }
    }

    public func subscriptions(userID: String) async throws -> [SubscriptionStatus] {
        try await withConnection { session in
            let subscribed = Set(try await session.rows("SELECT topic_key FROM subscriptions WHERE user_id = \(userID)").map { try $0.text("topic_key") })
            return try await session.rows(PostgresQuery(unsafeSQL: Self.entrySQL + " ORDER BY c.seq, a.seq, s.seq")).map { row in
                let entry = try StoredRecords.entry(row)
                return SubscriptionStatus(entry: entry, subscribed: entry.subject.opt.level == .forced || subscribed.contains(entry.subject.topicKey))
            }
        }
    }

    public func subscribe(userID: String, topicKey: String, at date: Date) async throws {
        let now = Self.micros(date)
        try await transaction { session in
            try await Self.ensureUser(session, userID, at: now)
            try await session.execute(
                "INSERT INTO subscriptions (user_id, topic_key, created_at) VALUES (\(userID), \(topicKey), \(now)) ON CONFLICT DO NOTHING"
            )
        }
    }

    public func unsubscribe(userID: String, topicKey: String) async throws {
        try await withConnection { session in
            try await session.execute("DELETE FROM subscriptions WHERE user_id = \(userID) AND topic_key = \(topicKey)")
        }
    }

    static let entrySQL = """
        SELECT s.*, a.name AS area_name, c.name AS channel_name
        FROM subjects s JOIN areas a ON a.id = s.area_id JOIN channels c ON c.id = s.channel_id
        """

    static func binds(_ values: String...) -> PostgresBindings {
        var bindings = PostgresBindings()
        for value in values { bindings.append(value) }
        return bindings
    }
}
